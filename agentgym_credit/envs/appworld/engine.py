"""The client side of the AppWorld engine: its virtual environment, its template and one episode's world.

``appworld==0.1.3.post1`` pins ``pydantic<2`` and cannot live in the project's environment, so it gets
its own virtual environment (:func:`setup_appworld_venv`, also ``agc appworld setup`` and ``make``)
and runs in separate processes (``engine_server.py`` in this folder, started with that venv's Python).
:func:`shared_engine` starts the engine's *template* on demand, shares it between every member env of
this process and starts a fresh one if it died or stopped answering. Each episode holds a
:class:`WorldConnection`: one socket to its own *world server*, a fork of the template made for that
episode (``engine_server.py`` describes both processes and the protocol). The agent's code never runs
in either: it runs in its own sandboxed process (:mod:`agentgym_credit.envs.appworld.sandbox`), whose
API channel the client attaches to the world server.

Contents: :func:`appworld_venv_dir`, :func:`setup_appworld_venv`, :class:`EngineProcess`,
:func:`shared_engine`, :class:`WorldConnection`, :class:`EngineLost`, :class:`EngineError`,
:class:`AppWorldNotInstalled`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agentgym_credit.user_cache import cache_root

__all__ = [
    "APPWORLD_REQUIREMENT",
    "AppWorldNotInstalled",
    "EngineError",
    "EngineLost",
    "EngineProcess",
    "MAX_REPLY_BYTES",
    "REQUIREMENTS",
    "SECCOMP_REQUIREMENT",
    "WorldConnection",
    "appworld_venv_dir",
    "setup_appworld_venv",
    "shared_engine",
    "world_cache_dir",
]

APPWORLD_REQUIREMENT = "appworld==0.1.3.post1"
SECCOMP_REQUIREMENT = "pyseccomp==0.1.2"  # the agent process's seccomp filter (ctypes binding of libseccomp2)
REQUIREMENTS = (APPWORLD_REQUIREMENT, SECCOMP_REQUIREMENT)
SERVER_SCRIPT = Path(__file__).with_name("engine_server.py")
READY_STAMP = ".agc-appworld-ready"
START_TIMEOUT_S = 180.0
HELLO_TIMEOUT_S = 30.0  # a template that forks no world server within this is restarted
BUILD_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 60.0
MAX_REPLY_BYTES = 64 * 1024 * 1024  # the longest reply read from a world server (its largest, a fork's save,
# is a few megabytes: each app's database grows by at most engine_server.MAX_GROWTH_BYTES)


class AppWorldNotInstalled(RuntimeError):
    """The AppWorld virtual environment is missing; run ``agc appworld setup`` (or ``make install``)."""


class EngineLost(RuntimeError):
    """The engine's template or this episode's world server stopped, or stopped answering."""


class EngineError(RuntimeError):
    """The world server answered a request with an error (it keeps serving)."""


def appworld_venv_dir() -> Path:
    """Where the AppWorld virtual environment lives: ``$AGC_APPWORLD_VENV`` or the user cache."""
    configured = os.environ.get("AGC_APPWORLD_VENV")
    if configured:
        return Path(configured).expanduser()
    return cache_root() / "appworld" / "venv-0.1.3.post1"


def world_cache_dir() -> Path:
    """Where the engine caches built worlds: ``$AGC_APPWORLD_CACHE`` or the user cache."""
    configured = os.environ.get("AGC_APPWORLD_CACHE")
    if configured:
        return Path(configured).expanduser()
    return cache_root() / "appworld" / "worlds"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def missing_requirements(stamp_text: str) -> list[str]:
    """The :data:`REQUIREMENTS` a ready stamp (one requirement per line) does not list."""
    present = {line.strip() for line in stamp_text.splitlines()}
    return [requirement for requirement in REQUIREMENTS if requirement not in present]


def setup_appworld_venv(venv: str | os.PathLike[str] | None = None, *, quiet: bool = True) -> Path:
    """Create the AppWorld venv, install the package and decrypt its apps (``appworld install``, offline).

    Idempotent: a venv whose ready stamp lists every requirement is left as it is; one set up before a
    requirement was added (``pyseccomp``) gets just that requirement.

    Args:
        venv: where to create it (default :func:`appworld_venv_dir`).
        quiet: pass ``--quiet`` to pip.

    Returns:
        The venv directory.
    """
    venv = Path(venv) if venv is not None else appworld_venv_dir()
    stamp = venv / READY_STAMP
    python = _venv_python(venv)
    pip = [str(python), "-m", "pip", "install", *(["--quiet"] if quiet else [])]
    if stamp.exists() and python.exists():
        missing = missing_requirements(stamp.read_text())
        if not missing:
            return venv
        if APPWORLD_REQUIREMENT not in missing:
            subprocess.run([*pip, *missing], check=True)
            stamp.write_text("\n".join(REQUIREMENTS) + "\n")
            return venv
    if not python.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    subprocess.run([str(venv / "bin" / "appworld"), "install"], check=True, capture_output=quiet)
    check = (
        "import appworld.apps.venmo.apis, appworld.apps.simple_note.apis, appworld.apps.phone.apis, pyseccomp"
    )
    subprocess.run([str(python), "-c", check], check=True, capture_output=True)
    stamp.write_text("\n".join(REQUIREMENTS) + "\n")
    return venv


def process_state(pid: int) -> str:
    """The state letter of ``/proc/<pid>/stat`` (``R``, ``S``, ``T`` stopped, ``Z`` zombie), ``X`` if gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


class EngineProcess:
    """One running engine template: the loaded apps, forking a world server per connection.

    Args:
        venv: the AppWorld venv (must be set up).
        memory_mb: address space each world server may add on top of the loaded engine.
        cache_dir: the world cache (default :func:`world_cache_dir`).
    """

    def __init__(
        self, venv: Path, memory_mb: int = 1024, cache_dir: str | os.PathLike[str] | None = None
    ) -> None:
        python = _venv_python(venv)
        if not (venv / READY_STAMP).exists() or not python.exists():
            raise AppWorldNotInstalled(
                f"the AppWorld virtual environment {venv} is not set up; run `agc appworld setup` "
                "(or `make install`), or set AGC_APPWORLD_VENV to an existing one"
            )
        self.venv = venv
        self.memory_mb = int(memory_mb)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else world_cache_dir()
        self.hung = False
        self._dir = tempfile.mkdtemp(prefix="agc-appworld-")  # mode 0700: only this user reaches the socket
        self.socket_path = os.path.join(self._dir, "engine.sock")
        env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPATH", None)
        self.process = subprocess.Popen(
            [
                str(python),
                str(SERVER_SCRIPT),
                "--socket",
                self.socket_path,
                "--memory-mb",
                str(self.memory_mb),
                "--cache-dir",
                str(self.cache_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=self._dir,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = result[0] if result else ""
        if not line.startswith("READY"):
            self.stop()
            raise EngineLost(
                f"the AppWorld engine did not start (exit code {self.process.poll()}, said {line!r})"
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        """Whether the template is running (not ended, not stopped)."""
        return self.process.poll() is None and process_state(self.pid) not in ("T", "t", "Z", "X")

    def usable(self) -> bool:
        """Whether new worlds may come from this template."""
        return not self.hung and self.alive()

    def abandon(self) -> None:
        """Kill the template only (a hung one); the world servers it forked keep serving their episodes."""
        self.hung = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        self._cleanup()

    def stop(self) -> None:
        """Stop the template and every world server it forked (its process group)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self._cleanup()

    def _cleanup(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)


_ENGINES: dict[tuple[str, int, str], EngineProcess] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(
    venv: str | os.PathLike[str] | None = None,
    memory_mb: int = 1024,
    cache_dir: str | os.PathLike[str] | None = None,
) -> EngineProcess:
    """The template shared by every member of this process; started on demand, restarted if dead or hung."""
    path = Path(venv) if venv is not None else appworld_venv_dir()
    cache = Path(cache_dir) if cache_dir is not None else world_cache_dir()
    key = (str(path.resolve()), int(memory_mb), str(cache.resolve()))
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None or not engine.usable():
            if engine is not None:
                engine.abandon() if engine.hung or engine.process.poll() is None else engine.stop()
            engine = EngineProcess(path, memory_mb, cache)
            _ENGINES[key] = engine
        return engine


@atexit.register
def _stop_engines() -> None:
    for engine in list(_ENGINES.values()):
        engine.stop()
    _ENGINES.clear()


class WorldConnection:
    """One episode's world: a socket to a world server forked for it by the engine's template.

    Connecting waits for the fork's hello; a template that is stopped, or forks nothing within
    ``hello_timeout`` seconds, is marked hung (:func:`shared_engine` then starts a new one) and
    :class:`EngineLost` is raised.

    Args:
        engine: the running template.
        hello_timeout: seconds to wait for the world server's hello.

    Attributes:
        max_reply_bytes: the longest reply read (:data:`MAX_REPLY_BYTES`); a longer one, as a reply that is
            not JSON, loses the world (:class:`EngineLost`): it is never read whole into this process.
    """

    def __init__(self, engine: EngineProcess, hello_timeout: float = HELLO_TIMEOUT_S) -> None:
        self.engine = engine
        self.max_reply_bytes = MAX_REPLY_BYTES
        self.world_pid: int | None = None
        self._pidfd: int | None = None
        self._sock: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._buffer = bytearray()
        deadline = time.monotonic() + hello_timeout
        try:
            self._sock.settimeout(hello_timeout)
            self._sock.connect(engine.socket_path)
            hello = self._wait_hello(deadline)
        except (OSError, ValueError) as exc:
            self.close()
            if not engine.alive() or isinstance(exc, TimeoutError):
                engine.hung = True
            raise EngineLost(f"cannot reach the AppWorld engine: {exc}") from exc
        self.world_pid = int(hello["pid"])
        with contextlib.suppress(OSError, AttributeError):
            self._pidfd = os.pidfd_open(self.world_pid)

    def _wait_hello(self, deadline: float) -> dict:
        while True:
            ready, _, _ = select.select([self._sock], [], [], 0.25)
            if ready:
                return self._read_reply(max(0.1, deadline - time.monotonic()))
            if not self.engine.alive():
                self.engine.hung = True
                raise TimeoutError(
                    f"the AppWorld engine's template (pid {self.engine.pid}) is stopped or gone"
                )
            if time.monotonic() > deadline:
                self.engine.hung = True
                raise TimeoutError("the AppWorld engine's template forked no world in time")

    def _read_reply(self, timeout: float) -> dict:
        assert self._sock is not None
        self._sock.settimeout(timeout)
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end > self.max_reply_bytes or (end < 0 and len(self._buffer) > self.max_reply_bytes):
                raise ValueError(
                    f"the AppWorld world server sent a reply longer than {self.max_reply_bytes} bytes"
                )
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                try:
                    return json.loads(line)
                except RecursionError:
                    raise ValueError("the AppWorld world server sent a reply nested too deeply") from None
            searched = len(self._buffer)
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the AppWorld world server closed the connection (its process ended)")
            self._buffer += chunk

    def request(
        self, op: str, timeout: float | None = None, fds: tuple[int, ...] = (), **fields: Any
    ) -> dict[str, Any]:
        """Send one request and return the reply.

        Raises:
            EngineLost: the world server is gone or did not answer within ``timeout`` (it is then killed).
            EngineError: the world server reported an error.
        """
        if self._sock is None:
            raise EngineLost("this world's connection is closed")
        seconds = (  # a step's code check may take the step's seconds (``begin``'s ``seconds``) on top
            timeout
            if timeout is not None
            else (BUILD_TIMEOUT_S if op == "build" else REQUEST_TIMEOUT_S + float(fields.get("seconds") or 0))
        )
        try:
            self._sock.settimeout(seconds)
            data = (json.dumps({"op": op, **fields}) + "\n").encode()
            if fds:
                sent = socket.send_fds(self._sock, [data], list(fds))
                self._sock.sendall(data[sent:])
            else:
                self._sock.sendall(data)
            reply = self._read_reply(seconds)
        except (OSError, ValueError) as exc:
            self.close()
            raise EngineLost(f"the AppWorld world stopped answering ({type(exc).__name__}: {exc})") from exc
        if not reply.get("ok", False):
            raise EngineError(f"AppWorld engine error in {op!r}: {reply.get('error')}")
        return reply

    def build(self, seed: int, instruction: str, fresh: bool = False) -> dict[str, Any]:
        """Load (or build) the world of ``seed``, ``instruction`` its task; ``summary``, ``api_names``."""
        return self.request("build", seed=int(seed), instruction=str(instruction), fresh=bool(fresh))

    def attach(self, channel: socket.socket) -> None:
        """Hand the world server the world end of a new agent REPL's API channel."""
        self.request("attach", fds=(channel.fileno(),))

    def close(self) -> None:
        """Close the connection and kill the world server (it would exit on the closed socket anyway)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            os.close(self._pidfd)
            self._pidfd = None
