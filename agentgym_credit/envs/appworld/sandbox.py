"""The agent's process and its operating-system wall: bubblewrap, seccomp and resource limits.

Each episode's agent code runs in its own process (``agent_worker.py`` in this folder), never in the
world server that holds the databases and never in this process. :class:`AgentProcess` starts it
with bubblewrap (``bwrap``, Debian package ``bubblewrap``; ``make install`` installs it):

* ``--unshare-all --unshare-user``: its own user (uid 65534 inside, no capabilities), PID, network
  (no interface but a down loopback), IPC, UTS and cgroup namespaces: it sees no other process and
  reaches no network;
* a file system of read-only binds of only what Python needs: the base Python install of the AppWorld
  venv (without its ``site-packages``), the shared libraries its modules load, ``pendulum`` and its
  dependencies, ``pyseccomp`` and the worker script; ``/dev`` (null, zero, random devices; read-only:
  no file can be created in it), no ``/proc``, no ``/etc``, no ``/tmp``, no home, no project package,
  no task files, no world cache; the root read-only (and ``RLIMIT_FSIZE`` 0 besides);
* ``--die-with-parent`` and ``--new-session``: killing the outer ``bwrap`` process kills the PID
  namespace and everything in it; no terminal to inject input into.

Inside, before any agent code, the worker loads a seccomp filter (``pyseccomp``) that denies
``execve``/``execveat``, ``fork``/``vfork``/``clone``/``clone3`` (no process or thread after set-up),
socket creation, ``connect``/``bind``, ``sendmsg`` (no descriptor passing), ``ptrace`` and
``process_vm_*``, signals to any process but itself, mounts, namespaces, ``chroot``, ``io_uring``,
``bpf``, System V IPC (a shared memory segment's memory is outside ``RLIMIT_AS``), module loading and the
like, and sets ``RLIMIT_AS`` (its size + ``memory_mb``),
``RLIMIT_CPU`` (the episode's CPU budget), ``RLIMIT_FSIZE`` 0, ``RLIMIT_NOFILE`` 16 and
``RLIMIT_NPROC`` 0. Its only ways out are its two inherited sockets: control (this process) and API
(its world server).

Every worker runs with one string hash seed (``PYTHONHASHSEED``; Python's ``-I`` would ignore it, so the
flags are ``-P -s`` and the environment is set whole) and, once told its episode, a seeded ``random`` and a
frozen clock: a replay of an episode's code steps prints what the episode printed. For a fork,
:meth:`AgentProcess.snapshot` has the REPL pickle its variables inside the sandbox and returns them as
opaque bytes, which only another sandboxed REPL loads (:meth:`AgentProcess.restore`, before it is attached
to a world).

Time limits are enforced from outside: a step that has not answered ``step_seconds`` + ``grace``
seconds after it was sent (an agent catching the in-process alarm, a C call the alarm cannot
interrupt) gets its process killed; :class:`AgentLost` tells the env, which starts a fresh REPL on the
same world. Replies are untrusted text: size-capped, type-checked, matched to the step's sequence
number; anything else is :class:`AgentLost` too.

:func:`probe_sandbox` checks once per process that the wall holds on this machine (bwrap starts a
Python that runs as uid 65534 and cannot fork, exec, open sockets, create shared memory or signal other
processes, nor see ``/etc/passwd``); :class:`~agentgym_credit.envs.appworld.env.AppWorldEnv` refuses to start otherwise
(:class:`SandboxUnavailable`), unless ``unsafe_no_sandbox=True`` (trusted code only: the worker then
runs as a plain child process, still separate from the world server, with the same limits but no
namespaces and no seccomp filter).

Contents: :class:`AgentProcess`, :class:`AgentLost`, :class:`SandboxUnavailable`, :class:`SandboxLayout`,
:func:`sandbox_layout`, :func:`probe_sandbox`, :func:`bwrap_command`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_credit.envs.appworld.engine_server import WORLD_DATETIME

__all__ = [
    "AgentLost",
    "AgentProcess",
    "DEFAULT_GRACE_SECONDS",
    "SandboxLayout",
    "SandboxUnavailable",
    "bwrap_command",
    "probe_sandbox",
    "sandbox_layout",
]

WORKER_SCRIPT = Path(__file__).with_name("agent_worker.py")
SANDBOX_ROOT = "/opt/agc"  # where the worker and its packages appear inside the sandbox
SITE_PACKAGES = ("pendulum", "dateutil", "tzdata", "freezegun", "pyseccomp.py")  # what the worker imports
HASH_SEED = "0"  # every REPL hashes str alike: a set prints in the same order in a fork and in a replay
DEFAULT_GRACE_SECONDS = 2.0
START_TIMEOUT_S = 60.0
KILL_TIMEOUT_S = 10.0  # how long a killed worker may take to be gone (normally milliseconds)
MAX_REPLY_BYTES = 1024 * 1024  # the longest reply read from the agent's process
MAX_STATE_REPLY_BYTES = 12 * 1024 * 1024  # the longest snapshot reply (the REPL state, base64)
FIX = (
    "install bubblewrap (`apt-get install bubblewrap`, or `make install`) on a kernel that allows "
    "unprivileged user namespaces, and run `agc appworld setup` (it installs pyseccomp into the AppWorld "
    "venv); for trusted code only, pass unsafe_no_sandbox=True to AppWorldEnv / gym.make"
)


class SandboxUnavailable(RuntimeError):
    """The agent sandbox (bubblewrap + seccomp) does not work on this machine; the message names the fix."""


class AgentLost(RuntimeError):
    """The agent's process was killed (over time), ended, or sent a reply that is not one."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class SandboxLayout:
    """What the agent's process needs from the host: its Python, shared libraries and packages."""

    python: str
    stdlib: str
    site_packages: str
    libraries: tuple[str, ...]
    library_path: str


def _ldd(paths: list[str]) -> set[str]:
    """Every shared library (and the loader) the ELF files at ``paths`` load, as the loader resolves them."""
    found: set[str] = set()
    result = subprocess.run(["ldd", *paths], capture_output=True, text=True, check=False)
    for line in result.stdout.splitlines():
        parts = line.strip().split()
        if (
            "=>" in parts
            and len(parts) > parts.index("=>") + 1
            and parts[parts.index("=>") + 1].startswith("/")
        ):
            found.add(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/") and ".so" in parts[0] and not parts[0].endswith(":"):
            found.add(parts[0])
    return found


@functools.lru_cache(maxsize=4)
def sandbox_layout(venv: str) -> SandboxLayout:
    """The host files the sandboxed worker binds read-only, for the AppWorld venv at ``venv``."""
    root = Path(venv)
    python = os.path.realpath(root / "bin" / "python")
    stdlib_dirs = sorted((Path(python).parent.parent / "lib").glob("python3.*"))
    site = sorted((root / "lib").glob("python3.*/site-packages"))
    if not stdlib_dirs or not site:
        raise SandboxUnavailable(f"cannot find the Python install of the AppWorld venv {venv}; {FIX}")
    stdlib, site_packages = stdlib_dirs[-1], site[-1]
    elf = [python, *map(str, sorted(stdlib.glob("lib-dynload/*.so")))]
    elf += [str(p) for p in sorted((site_packages / "pendulum").glob("*.so"))]
    libraries = _ldd(elf)
    seccomp = [str(Path(lib).parent / "libseccomp.so.2") for lib in sorted(libraries) if "/libc.so" in lib]
    seccomp = [path for path in seccomp if os.path.exists(path)]
    if not seccomp:
        raise SandboxUnavailable(f"libseccomp.so.2 (Debian package libseccomp2) is not installed; {FIX}")
    libraries |= set(seccomp) | _ldd(seccomp)
    library_path = ":".join(sorted({os.path.dirname(lib) for lib in libraries}))
    return SandboxLayout(python, str(stdlib), str(site_packages), tuple(sorted(libraries)), library_path)


def bwrap_command(bwrap: str, layout: SandboxLayout, worker_args: list[str], proc: bool = False) -> list[str]:
    """The bubblewrap command line that runs the worker (``proc``: a /proc of its own, for the probe)."""
    command = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--hostname",
        "appworld",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "LD_LIBRARY_PATH",
        layout.library_path,
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "PYTHONDONTWRITEBYTECODE",
        "1",
        "--setenv",
        "PYTHONHASHSEED",
        HASH_SEED,
        "--setenv",
        "HOME",
        "/nonexistent",
    ]
    for library in layout.libraries:
        command += ["--ro-bind", os.path.realpath(library), library]
    command += ["--ro-bind", layout.python, layout.python, "--ro-bind", layout.stdlib, layout.stdlib]
    if os.path.isdir(os.path.join(layout.stdlib, "site-packages")):  # the base install's own packages: hidden
        hidden = os.path.join(layout.stdlib, "site-packages")
        command += ["--tmpfs", hidden, "--remount-ro", hidden]
    for name in SITE_PACKAGES:
        command += ["--ro-bind", os.path.join(layout.site_packages, name), f"{SANDBOX_ROOT}/site/{name}"]
    command += ["--ro-bind", str(WORKER_SCRIPT), f"{SANDBOX_ROOT}/agent_worker.py"]
    command += ["--dev", "/dev", "--remount-ro", "/dev"]  # device nodes stay usable, no file can be created
    if proc:
        command += ["--proc", "/proc"]
    command += [
        "--remount-ro",
        "/",
        "--chdir",
        "/",
        layout.python,
        *PYTHON_FLAGS,
        f"{SANDBOX_ROOT}/agent_worker.py",
        "--site",
        f"{SANDBOX_ROOT}/site",
        *worker_args,
    ]
    return command


# ``-I`` without ``-E``: ``-E`` would ignore PYTHONHASHSEED; the worker's environment is set whole instead
# (bubblewrap's ``--clearenv``, :data:`PLAIN_ENVIRONMENT` without it)
PYTHON_FLAGS = ("-P", "-s", "-S", "-B")
PLAIN_ENVIRONMENT = {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": HASH_SEED}


def _plain_command(layout: SandboxLayout, worker_args: list[str]) -> list[str]:
    """The worker without the sandbox (``unsafe_no_sandbox``): a plain child, its packages from the venv."""
    return [
        layout.python,
        *PYTHON_FLAGS,
        str(WORKER_SCRIPT),
        "--site",
        layout.site_packages,
        "--no-seccomp",
        *worker_args,
    ]


@dataclass(frozen=True)
class _Probe:
    ok: bool
    message: str
    address_space: int


_PROBES: dict[tuple[str, str], _Probe] = {}
_PROBE_LOCK = threading.Lock()


def probe_sandbox(venv: str | os.PathLike[str]) -> int:
    """Check once per process that the sandbox holds here; the worker's measured address space in bytes.

    Raises:
        SandboxUnavailable: bubblewrap is missing or fails, or the worker's checks found a hole.
    """
    bwrap = shutil.which("bwrap") or ""
    key = (bwrap, str(venv))
    with _PROBE_LOCK:
        if key not in _PROBES:
            _PROBES[key] = _run_probe(bwrap, str(venv))
        probe = _PROBES[key]
    if not probe.ok:
        raise SandboxUnavailable(
            f"AppWorld's agent sandbox does not work on this machine: {probe.message}. Fix: {FIX}"
        )
    return probe.address_space


def _run_probe(bwrap: str, venv: str) -> _Probe:
    if not bwrap:
        return _Probe(False, "bubblewrap (bwrap) is not installed", 0)
    try:
        layout = sandbox_layout(venv)
        probe = _spawn(bwrap_command(bwrap, layout, ["--probe"], proc=True), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    except (SandboxUnavailable, OSError) as exc:
        return _Probe(False, str(exc), 0)
    try:
        stdout, stderr = probe.communicate(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(probe.pid, signal.SIGKILL)  # bwrap and whatever it had started
        probe.communicate()
        return _Probe(False, f"the probe did not finish in {START_TIMEOUT_S:g} s", 0)
    try:
        report = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = (stderr or stdout).strip()[-500:]
        return _Probe(False, f"bwrap exited with status {probe.returncode}: {said}", 0)
    if not report.get("ok"):
        return _Probe(False, "; ".join(report.get("problems", [])) or "the checks failed", 0)
    return _Probe(True, "", int(report.get("address_space") or 0))


# ------------------------------------------------------------------------------------------ spawning
_SPAWNER: tuple[int, threading.Thread, queue.Queue] | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner(requests: queue.Queue) -> None:
    while True:
        args, kwargs, reply = requests.get()
        try:
            reply.put(subprocess.Popen(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            reply.put(exc)


def _forget_spawner() -> None:
    global _SPAWNER, _SPAWNER_LOCK
    _SPAWNER, _SPAWNER_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_spawner)  # a forked child starts its own spawner thread


def _spawn(*args: Any, **kwargs: Any) -> subprocess.Popen:
    """``Popen`` from one long-lived thread of this process: ``--die-with-parent`` ties bwrap to the thread
    that started it (``PR_SET_PDEATHSIG``), and a caller's thread (a pool's) may end before the episode."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None or _SPAWNER[0] != os.getpid() or not _SPAWNER[1].is_alive():
            requests: queue.Queue = queue.Queue()
            thread = threading.Thread(
                target=_spawner, args=(requests,), name="agc-appworld-spawner", daemon=True
            )
            thread.start()
            _SPAWNER = (os.getpid(), thread, requests)
        requests = _SPAWNER[2]
    reply: queue.Queue = queue.Queue(1)
    requests.put((args, kwargs, reply))
    result = reply.get()
    if isinstance(result, BaseException):
        raise result
    return result


def _pidfd_of_child(pid: int) -> int | None:
    """A pidfd of the one child of process ``pid`` (bubblewrap's namespace init), None if there is none."""
    try:
        children = [
            int(child)
            for task in os.listdir(f"/proc/{pid}/task")
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        ]
        return os.pidfd_open(children[0]) if len(children) == 1 else None
    except (OSError, ValueError, AttributeError):
        return None


class AgentProcess:
    """One agent REPL process: spawned at once, set up by :meth:`start`, stepped by :meth:`execute`.

    Args:
        venv: the AppWorld venv (its base Python and packages).
        sandboxed: run under bubblewrap with the seccomp filter (False: ``unsafe_no_sandbox``).
        memory_mb: address space the REPL may add to its own.
        cpu_seconds: CPU seconds the process may use in all (``RLIMIT_CPU``).

    Attributes:
        world_end: the world server's end of the API channel, to hand over with
            :meth:`~agentgym_credit.envs.appworld.engine.WorldConnection.attach` (then
            :meth:`release_world_end`).
    """

    def __init__(
        self, venv: str | os.PathLike[str], *, sandboxed: bool, memory_mb: int, cpu_seconds: int
    ) -> None:
        self.sandboxed = sandboxed
        self.memory_mb = int(memory_mb)
        self.cpu_seconds = int(cpu_seconds)
        self.base_bytes = probe_sandbox(venv) if sandboxed else 0
        layout = sandbox_layout(str(venv))
        self._control, control_child = socket.socketpair()
        self.world_end, api_child = socket.socketpair()
        args = [
            "--ctrl-fd",
            str(control_child.fileno()),
            "--api-fd",
            str(api_child.fileno()),
            "--base-bytes",
            str(self.base_bytes or 64 * 1024 * 1024),
        ]
        command = (
            bwrap_command(shutil.which("bwrap") or "bwrap", layout, args)
            if sandboxed
            else _plain_command(layout, args)
        )
        try:
            self.process = _spawn(
                command,
                pass_fds=(control_child.fileno(), api_child.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,
                env=None if sandboxed else {**PLAIN_ENVIRONMENT, "LD_LIBRARY_PATH": layout.library_path},
            )
        except OSError as exc:
            for sock in (self._control, self.world_end):
                sock.close()
            raise AgentLost(f"the agent's REPL process did not start: {exc}", "start") from exc
        finally:
            control_child.close()
            api_child.close()
        self._buffer = bytearray()
        self._seq = 0
        self._namespace_init: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def release_world_end(self) -> None:
        """Close this process's copy of the world end (after the world server has its own)."""
        with contextlib.suppress(OSError):
            self.world_end.close()

    def start(
        self,
        api_names: dict[str, list[str]],
        seed: int = 0,
        clock: list[int] | tuple[int, ...] = WORLD_DATETIME,
        timeout: float = START_TIMEOUT_S,
    ) -> None:
        """Send the set-up (the API names, the limits, the ``random`` seed and the frozen clock of the
        episode: the world's, as its server reports it) and wait until the REPL is ready behind its wall."""
        self._send(
            {
                "op": "init",
                "api_names": api_names,
                "memory_mb": self.memory_mb,
                "cpu_seconds": self.cpu_seconds,
                "seed": int(seed),
                "clock": [int(part) for part in clock],
            }
        )
        reply = self._receive(time.monotonic() + timeout)
        if not (isinstance(reply, dict) and reply.get("ready") is True):
            raise self._lost(f"the agent's REPL did not start ({self._stderr()})", "start")
        if self.sandboxed:  # the PID namespace's init, now set up: kill() waits for it
            self._namespace_init = _pidfd_of_child(self.process.pid)

    def execute(
        self, code: str, seconds: float, refusal: str | None, grace: float = DEFAULT_GRACE_SECONDS
    ) -> dict:
        """Run one step's ``code``; ``{"output": str, "error": bool}``.

        Raises:
            AgentLost: no valid reply within ``seconds + grace`` seconds (the process is then killed), the
                process ended, or its reply is malformed.
        """
        reply = self._call({"op": "execute", "code": code, "refusal": refusal}, seconds, grace)
        output, error = reply.get("output"), reply.get("error")
        if not isinstance(output, str) or not isinstance(error, bool):
            raise self._lost("the Python REPL sent a reply that is not one", "invalid reply")
        return {"output": output, "error": error}

    def snapshot(self, seconds: float, grace: float = DEFAULT_GRACE_SECONDS) -> tuple[bytes | None, str]:
        """The REPL's variables and ``random`` state, pickled inside the sandbox: opaque bytes that only a
        sandboxed REPL ever loads (:meth:`restore`); ``(None, why)`` when they do not pickle.

        Raises:
            AgentLost: as :meth:`execute` (the process is then killed).
        """
        reply = self._call({"op": "snapshot"}, seconds, grace, cap=MAX_STATE_REPLY_BYTES)
        state, reason = reply.get("state"), reply.get("reason")
        if state is None and isinstance(reason, str):
            return None, reason[:300]
        if not isinstance(state, str):
            raise self._lost("the Python REPL sent a reply that is not one", "invalid reply")
        try:
            return base64.b64decode(state.encode("ascii"), validate=True), ""
        except (ValueError, UnicodeEncodeError):
            raise self._lost("the Python REPL sent a reply that is not one", "invalid reply") from None

    def restore(self, state: bytes, seconds: float, grace: float = DEFAULT_GRACE_SECONDS) -> str | None:
        """Load a :meth:`snapshot` of another REPL into this fresh one, inside its sandbox (before it is
        attached to a world); None when done, else why it could not.

        Raises:
            AgentLost: as :meth:`execute` (the process is then killed).
        """
        text = base64.b64encode(state).decode("ascii")
        reply = self._call({"op": "restore", "state": text}, seconds, grace)
        restored, reason = reply.get("restored"), reply.get("reason")
        if not isinstance(restored, bool) or not isinstance(reason, str):
            raise self._lost("the Python REPL sent a reply that is not one", "invalid reply")
        return None if restored else reason[:300] or "the REPL refused the state"

    def discard_world_input(self) -> None:
        """Drop whatever the REPL wrote to its API channel before it is attached to a world: a restored REPL
        is attached only after this, so its world sees only requests of the steps that follow."""
        with contextlib.suppress(OSError):
            while self.world_end.recv(1 << 16, socket.MSG_DONTWAIT):
                pass

    def _call(self, message: dict, seconds: float, grace: float, cap: int = MAX_REPLY_BYTES) -> dict:
        """Send one control request and wait for its reply (matched by sequence number)."""
        self._seq += 1
        self._send({**message, "seq": self._seq, "seconds": float(seconds)})
        deadline = time.monotonic() + float(seconds) + float(grace)
        while True:
            reply = self._receive(deadline, cap)
            if not isinstance(reply, dict):
                raise self._lost("the Python REPL sent a reply that is not one", "invalid reply")
            if reply.get("seq") == self._seq:
                return reply
            # a stale or forged reply of another request: skipped

    def _send(self, message: dict) -> None:
        try:
            self._control.settimeout(10.0)
            self._control.sendall((json.dumps(message) + "\n").encode())
        except OSError as exc:
            raise self._lost(f"The Python REPL process ended ({exc})", "ended") from exc

    def _receive(self, deadline: float, cap: int = MAX_REPLY_BYTES) -> Any:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                try:
                    return json.loads(line)
                except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser recurses
                    return None
            if len(self._buffer) > cap:
                raise self._lost("the Python REPL sent a reply that is too long", "invalid reply")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._lost("the step ran past its time limit", "timeout")
            self._control.settimeout(remaining)
            try:
                chunk = self._control.recv(1 << 16)
            except TimeoutError:
                raise self._lost("the step ran past its time limit", "timeout") from None
            except OSError as exc:
                raise self._lost(f"The Python REPL process ended ({exc})", "ended") from exc
            if not chunk:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(2.0)  # its own exit status, if it is ending by itself
                self.kill()
                raise AgentLost(
                    f"The Python REPL process ended (exit status {self.process.returncode})", "ended"
                )
            self._buffer += chunk

    def _lost(self, message: str, reason: str) -> AgentLost:
        self.kill()
        return AgentLost(message, reason)

    def _stderr(self) -> str:
        if self.process.stderr is None or self.alive():
            return f"exit status {self.process.poll()}"
        with contextlib.suppress(OSError, ValueError):
            text = self.process.stderr.read(4000).decode(errors="replace").strip()
            return (
                f"exit status {self.process.returncode}: {text[-500:]}"
                if text
                else f"exit status {self.process.returncode}"
            )
        return f"exit status {self.process.returncode}"

    def kill(self) -> None:
        """Kill the process and everything it started.

        The process group goes at once: the outer ``bwrap`` and, while it is still setting the sandbox up,
        the namespace's init it cloned (which would otherwise wait forever for its dead parent); once set
        up, the init dies with the outer ``bwrap`` (``--die-with-parent``) and takes the PID namespace
        with it. Without the sandbox, the worker's group is all there is.
        """
        if self.process.returncode is None:  # not reaped yet: its pid (the group's id) is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self._wait_worker_gone()

    def _wait_worker_gone(self, timeout: float = KILL_TIMEOUT_S) -> None:
        """Wait until the worker inside the sandbox is gone too, not only the outer ``bwrap``.

        Reaping the outer ``bwrap`` does not mean the worker has exited: it dies when the namespace's
        init does (``--die-with-parent``), a moment later, and until then it may still send API requests.
        A fresh REPL is attached to the world only after this returns, so the world server never sees the
        old one's requests (or its end of stream) after the new one's. A set-up REPL's namespace init is
        watched through a pidfd: the kernel reports its exit only once every process of its namespace is
        gone. Otherwise (killed while starting, or no sandbox) the control channel's end of stream does:
        only the worker and, while setting up, the ``bwrap`` processes (killed above) hold its other end.
        """
        deadline = time.monotonic() + timeout
        if self._namespace_init is not None:
            with contextlib.suppress(OSError, ValueError):
                select.select([self._namespace_init], [], [], timeout)
            os.close(self._namespace_init)
            self._namespace_init = None
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._control.settimeout(remaining)
                if not self._control.recv(1 << 16):  # what it still sent is dropped: the step is over
                    return
        except OSError:  # closed here already, or the timeout: nothing more to wait for
            return

    def close(self) -> None:
        """Kill the process and close both channels."""
        self.kill()
        for sock in (self._control, self.world_end):
            with contextlib.suppress(OSError):
                sock.close()
        if self.process.stderr is not None:
            with contextlib.suppress(OSError):
                self.process.stderr.close()
