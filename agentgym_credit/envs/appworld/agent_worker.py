"""The agent's REPL process: runs the agent's code with a thin proxy of the world's APIs, nothing else.

Started by :class:`~agentgym_credit.envs.appworld.sandbox.AgentProcess` with the AppWorld venv's base
Python (``python -I -S -B agent_worker.py --ctrl-fd N --api-fd M --site DIR``), inside bubblewrap (see
:mod:`agentgym_credit.envs.appworld.sandbox`). It imports only the standard library, ``pendulum`` (the
REPL's preamble) and, before any agent code runs, ``pyseccomp``: never ``appworld``, never the task
files, the grader or the world cache, none of which exist in its file system. It holds no world data: every
``apis.<app>.<api>(**kwargs)`` is one JSON request to the episode's world server over an inherited
socket (transport only, as AppWorld's own remote-API mode), and the world server's result (or its
error, with the engine's message) comes back as the call's result (or raised exception).

Set-up, before the first agent code: the two inherited sockets move to fds 3 (control: the client)
and 4 (API: the world server); the client's ``init`` message gives the API names, the step time, the
memory and CPU budget; the REPL namespace is built (AppWorld's preamble imports, ``apis``); then
:func:`apply_limits` (``RLIMIT_AS`` = current size + ``memory_mb``, ``RLIMIT_CPU`` = the episode's CPU
budget, ``RLIMIT_FSIZE`` 0, ``RLIMIT_NOFILE`` 16, ``RLIMIT_NPROC`` 0, ``RLIMIT_CORE`` 0) and
:func:`load_seccomp` (no exec, fork, clone, socket creation, ptrace, signals to other processes, mounts,
namespaces or System V IPC); then the audit hook.

Execution of one step: the code is parsed first and any import outside :data:`ALLOWED_MODULES`, any
name in :data:`FORBIDDEN_NAMES` and any attribute that starts with an underscore or is in
:data:`FORBIDDEN_ATTRIBUTES` is refused (then AppWorld's own ``SafetyGuard`` verdict, which the
world server's guard process computes, since ``SafetyGuard`` lives in ``appworld``); an audit hook refuses ``open``,
sockets, processes and ``os`` side effects while agent code runs; a per-step alarm interrupts long
loops; printed output is capped at :data:`OUTPUT_CAP` characters. These Python-level checks are
defence in depth: the wall is the process (its namespaces, file system, seccomp filter and limits),
and the client kills it when a step overruns its time (see ``sandbox.py``).

The REPL is deterministic per episode, as AppWorld's own: the ``init`` message seeds ``random`` and freezes
the clock at the world's date (``freezegun``, which AppWorld uses too), and the client starts every REPL
with one string hash seed, so the same code steps print the same output in a replay of the episode.

A fork carries the REPL's variables: ``snapshot`` pickles the namespace and the ``random`` state
(:func:`dump_state`: modules and the ``apis`` proxy by name, library values by their own reduction, nothing
defined by agent code) and checks that a fresh REPL would load it; ``restore`` loads it into a fresh REPL
(:func:`load_state`, an unpickler that admits public names of :data:`PICKLE_MODULES` only), with the
audit hook armed and under the alarm, after the wall is up.

Protocol: one JSON object per line each way. Control requests ``{"op": "init", "api_names", "memory_mb",
"cpu_seconds", "seed", "clock"}`` (reply ``{"ready": true}``), ``{"op": "execute", "seq", "code", "seconds",
"refusal"}`` (reply ``{"seq", "output", "error"}``), ``{"op": "snapshot", "seq", "seconds"}`` (reply
``{"seq", "state": base64 text or null, "reason"}``) and ``{"op": "restore", "seq", "state", "seconds"}``
(reply ``{"seq", "restored", "reason"}``). API requests ``{"id", "app", "api", "kwargs"}``; replies ``{"id",
"ok": true, "result"}`` or ``{"id", "ok": false, "error": {"module", "name", "args", "text"}}``.

``python agent_worker.py --probe`` applies the limits and the filter and prints one JSON line saying
whether they hold (the client's check that the sandbox works on this machine).
"""

from __future__ import annotations

import argparse
import ast
import base64
import builtins
import io
import json
import os
import pickle
import random
import resource
import signal
import sys
import traceback
import types
import zlib
from typing import Any

OUTPUT_CAP = 20_000  # characters kept from one step's printed output (the env truncates further)
MAX_LINE_BYTES = 16 * 1024 * 1024  # the longest control request or API reply this process reads
MAX_REQUEST_BYTES = 1024 * 1024  # the longest API request (engine_server.py enforces the same figure)
CTRL_FD = 3
"""The descriptor of the control channel (code in, the step's output out)."""
API_FD = 4
"""The descriptor of the channel to the world server (the ``apis`` proxy's requests)."""
NOFILE_LIMIT = 16
REPL_STATE_BYTES = 8 * 1024 * 1024  # the largest REPL state a snapshot carries (pickled, compressed)
ALLOWED_MODULES = frozenset(
    {
        "math",
        "json",
        "re",
        "datetime",
        "calendar",
        "itertools",
        "functools",
        "collections",
        "collections.abc",
        "copy",
        "random",
        "string",
        "textwrap",
        "statistics",
        "decimal",
        "fractions",
        "heapq",
        "bisect",
        "operator",
        "difflib",
        "pendulum",
        "typing",
        "enum",
        "dataclasses",
        "pprint",
        "uuid",
    }
)
FORBIDDEN_MODULES = frozenset(
    {
        "os",
        "posix",
        "subprocess",
        "_posixsubprocess",
        "ctypes",
        "_ctypes",
        "socket",
        "_socket",
        "ssl",
        "multiprocessing",
        "_multiprocessing",
        "pty",
        "shutil",
        "signal",
        "resource",
        "mmap",
        "fcntl",
        "importlib",
        "sys",
        "threading",
        "_thread",
        "asyncio",
        "urllib",
        "http",
        "requests",
        "httpx",
    }
)
FORBIDDEN_NAMES = frozenset(
    {
        "__import__",
        "exec",
        "eval",
        "compile",
        "open",
        "globals",
        "vars",
        "breakpoint",
        "input",
        "exit",
        "quit",
        "__builtins__",
        "__subclasses__",
        "__globals__",
        "__code__",
        "__class__",
        "__bases__",
        "__mro__",
        "__getattribute__",
        "__dict__",
        "__loader__",
        "__spec__",
        "gi_frame",
        "f_globals",
        "f_locals",
        "f_back",
        "tb_frame",
        "getattr",
        "setattr",
        "delattr",
    }
)
# attributes that lead from allowed modules to the host (``calendar.sys``, ``pendulum.helpers.os``)
FORBIDDEN_ATTRIBUTES = frozenset(
    {"os", "sys", "modules", "posix", "subprocess", "socket", "ctypes", "builtins"}
)
BLOCKED_AUDIT_PREFIXES = (
    "open",
    "os.",
    "socket.",
    "subprocess.",
    "ctypes.",
    "shutil.",
    "pty.",
    "fcntl.",
    "mmap.",
    "sqlite3.connect",
    "urllib.",
    "http.",
    "ftplib.",
    "telnetlib.",
    "smtplib.",
    "webbrowser.",
    "_posixsubprocess.",
    "sys.settrace",
    "sys.setprofile",
    "code.",
    "cpython.",
)
PREAMBLE = (  # AppWorld's REPL preamble (its usual imports)
    "import datetime, json, math, re, random, itertools, calendar\n"
    "from collections import Counter, defaultdict\nfrom copy import deepcopy\n"
    "from functools import reduce\nimport pendulum\n"
)
# system calls the agent's process may not make once set up (errno EPERM); kill/tkill/tgkill are
# allowed only towards itself (see load_seccomp)
DENIED_SYSCALLS = (
    "execve",
    "execveat",
    "fork",
    "vfork",
    "clone",
    "clone3",
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "sendmsg",
    "sendmmsg",
    "recvmsg",
    "recvmmsg",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "mount_setattr",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "move_mount",
    "open_tree",
    "open_by_handle_at",
    "name_to_handle_at",
    "setsid",
    "setpgid",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # System V IPC and POSIX message queues: their memory is the kernel's, outside RLIMIT_AS (a shared memory
    # segment attached, filled and detached again stays allocated, as much as the host has)
    "shmget",
    "shmat",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_timedsend",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "vhangup",
    "fanotify_init",
    "lookup_dcookie",
    "personality",
)
SANDBOX_UID = 65534
_AGENT_RUNNING = [False]
_CODE_ROOTS: list[str] = []


class StepTimeout(BaseException):
    """Raised in agent code when the per-step time limit is reached (BaseException: hard to catch)."""


class SandboxViolation(Exception):
    """Agent code tried something the sandbox forbids."""


# ------------------------------------------------------------------------------------- python-level checks
def _audit(event: str, args: tuple) -> None:
    if not _AGENT_RUNNING[0]:
        return
    if event == "import":  # agent imports are checked before running; this catches indirect ones
        if str(args[0]).split(".")[0] in FORBIDDEN_MODULES:
            raise SandboxViolation(f"import of {args[0]!r} is not allowed")
        return
    if event == "open" and _is_code_read(args):
        return  # the standard library and pendulum read their own installed files (read-only)
    if event.startswith(BLOCKED_AUDIT_PREFIXES):
        raise SandboxViolation(f"{event} is not allowed in the sandbox")


def _is_code_read(args: tuple) -> bool:
    path, mode = args[0], args[1] if len(args) > 1 else "r"
    if not isinstance(path, (str, bytes)) or (mode is not None and any(c in str(mode) for c in "wax+")):
        return False
    if len(args) > 2 and isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        return False
    real = os.path.realpath(os.fsdecode(path))
    return any(real.startswith(root + os.sep) for root in _CODE_ROOTS)


def _guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0):
    if level != 0 or name not in ALLOWED_MODULES and name.split(".")[0] not in ALLOWED_MODULES:
        raise SandboxViolation(f"Usage of the module {name!r} is not allowed.")
    return __import__(name, globals, locals, fromlist, level)


def check_code(code: str) -> str | None:
    """The reason ``code`` is refused before it runs, or None (syntax errors are left to ``exec``)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
        else:
            names = []
        for name in names:
            if name not in ALLOWED_MODULES:
                return f"Usage of the module {name!r} is not allowed."
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return f"Usage of {node.id!r} is not allowed."
        if isinstance(node, ast.Attribute) and (
            node.attr in FORBIDDEN_NAMES or node.attr in FORBIDDEN_ATTRIBUTES or node.attr.startswith("_")
        ):
            return f"Usage of the attribute {node.attr!r} is not allowed."
    return None


class _CappedWriter(io.TextIOBase):
    def __init__(self, cap: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0
        self.cap = cap

    def write(self, text: str) -> int:
        text = str(text)
        room = self.cap - self.size
        if room > 0:
            kept = text[:room]
            self.parts.append(kept)
            self.size += len(kept)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n... [{self.dropped} more characters]"
        return text


# ------------------------------------------------------------------------------------------- channels
class LineChannel:
    """Newline-delimited JSON over one file descriptor, with a size cap on what it reads.

    Writes block ``SIGALRM`` so that a step's time limit cannot cut a request in half.
    """

    def __init__(self, fd: int, cap: int = MAX_LINE_BYTES) -> None:
        self.fd = fd
        self.cap = cap
        self.buffer = bytearray()
        self._dumps = json.dumps  # bound now: agent code patching ``json`` cannot change the protocol
        self._loads = json.loads

    def send(self, message: dict) -> None:
        self.send_text(self._dumps(message))

    def send_text(self, text: str) -> None:
        data = (text + "\n").encode()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def receive(self) -> Any:
        """The next message (EOFError when the other end closed, ValueError for an over-long line, which is
        dropped whole)."""
        too_long = False
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                if too_long or len(line) > self.cap:
                    raise ValueError(f"a message longer than {self.cap} bytes")
                return self._loads(line)
            if len(self.buffer) > self.cap:
                self.buffer.clear()
                too_long = True
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError("the channel is closed")
            self.buffer += chunk


# ----------------------------------------------------------------------------------------- the apis proxy
_OPAQUE_KEY = "\x00agc-opaque"
_ERROR_CLASSES: dict[tuple[str, str], type] = {}


def _encode_opaque(value: Any) -> dict:
    """A value JSON cannot carry: its type name and ``str`` (what an HTTP query parameter sends)."""
    return {_OPAQUE_KEY: [type(value).__name__, str(value)]}


def remote_error(error: dict) -> BaseException:
    """The exception a world server reported, rebuilt with the same type name, module and message."""
    module, name = str(error.get("module", "builtins")), str(error.get("name", "Exception"))
    args, text = error.get("args"), str(error.get("text", ""))
    builtin = getattr(builtins, name, None) if module == "builtins" else None
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        for arguments in ([*args] if isinstance(args, list) else None, [text]):
            if arguments is None:
                continue
            try:
                rebuilt = builtin(*arguments)
            except Exception:  # noqa: BLE001 - try the next form
                continue
            if str(rebuilt) == text:
                return rebuilt
    key = (module, name)
    if key not in _ERROR_CLASSES:
        klass = type(name.rsplit(".", 1)[-1], (Exception,), {"__module__": module})
        klass.__qualname__ = name
        _ERROR_CLASSES[key] = klass
    return _ERROR_CLASSES[key](text)


def _http_error(message: str) -> BaseException:
    return remote_error({"module": "fastapi.exceptions", "name": "HTTPException", "text": f"422: {message}"})


class _Names(dict):
    """A dict with attribute access, as AppWorld's ``Munch`` collections (unknown names: its HTTP error)."""

    _missing = "{key}"

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise _http_error(object.__getattribute__(self, "_missing").format(key=key)) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        try:
            del self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"


class ApiCollection(_Names):
    """``apis``: one entry per app, each one entry per API (AppWorld's ``ApiCollection`` interface)."""

    _missing = "No app named '{key}' found."


ApiCollection.__module__ = "appworld.collections.apis"


class _CustomErrorMessageMunch(_Names):
    """One app's APIs."""


_CustomErrorMessageMunch.__module__ = "appworld.common.utils"
_CustomErrorMessageMunch.__qualname__ = "CustomErrorMessageMunch.build.<locals>._CustomErrorMessageMunch"


class ApiClient:
    """The API channel to the world server: one request, one reply (matched by id)."""

    def __init__(self, channel: LineChannel) -> None:
        self.channel = channel
        self.next_id = 0
        self._dumps = json.dumps

    def call(self, app: str, api: str, kwargs: dict) -> Any:
        self.next_id += 1
        request_id = self.next_id
        payload = self._dumps(
            {"id": request_id, "app": app, "api": api, "kwargs": kwargs}, default=_encode_opaque
        )
        if len(payload) + 1 > MAX_REQUEST_BYTES:  # the world server would drop it; say why here
            raise ValueError(
                f"the API request is {len(payload) + 1} bytes long; requests are limited to "
                f"{MAX_REQUEST_BYTES} bytes"
            )
        self.channel.send_text(payload)
        while True:
            try:
                reply = self.channel.receive()
            except EOFError:
                raise ConnectionError("the world's API channel is closed") from None
            if isinstance(reply, dict) and reply.get("id") == request_id:
                break  # replies to requests a step's time limit interrupted are skipped
        if reply.get("ok"):
            return reply.get("result")
        error = reply.get("error")
        raise remote_error(error if isinstance(error, dict) else {"name": "RuntimeError", "text": str(error)})


def _wrap_api_request(app_name: str, api_name: str, client: ApiClient) -> Any:
    def _api_request(**kwargs: Any) -> Any:
        return client.call(app_name, api_name, kwargs)

    return _api_request


def build_apis(api_names: dict[str, list[str]], client: ApiClient) -> ApiCollection:
    """The ``apis`` proxy: ``apis.<app>.<api>(**kwargs)`` calls the world server."""
    collection = ApiCollection()
    for app, names in api_names.items():
        munch = _CustomErrorMessageMunch()
        object.__setattr__(munch, "_missing", "No API named '{key}' found in the " + str(app) + " app.")
        for api in names:
            munch[str(api)] = _wrap_api_request(str(app), str(api), client)
        collection[str(app)] = munch
    return collection


# -------------------------------------------------------------------------------------------- the REPL
class Repl:
    """The agent's namespace and the execution of one step."""

    def __init__(self, apis: ApiCollection, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        safe_builtins = {k: v for k, v in vars(builtins).items() if k not in FORBIDDEN_NAMES}
        safe_builtins["__import__"] = _guarded_import
        safe_builtins["print"] = builtins.print
        safe_builtins["SystemExit"] = Exception  # as AppWorld's SafetyGuard sets it
        self.namespace: dict[str, Any] = {"__builtins__": safe_builtins, "__name__": "__agent__"}
        exec(PREAMBLE, self.namespace)  # run before the sandbox is armed
        self.namespace["apis"] = apis

    def snapshot(self, seconds: float) -> dict:
        """The REPL's variables and ``random`` state as opaque bytes (:func:`dump_state`); ``{"state": base64
        text}``, or ``{"state": None, "reason": why}`` when they do not pickle (the client then replays)."""
        try:
            state = _guarded(lambda: dump_state(self.namespace), seconds)
        except BaseException as exc:  # noqa: BLE001 - a value that does not pickle, memory, time
            return {"state": None, "reason": _short_reason(exc)}
        return {"state": base64.b64encode(state).decode("ascii"), "reason": ""}

    def restore(self, text: Any, seconds: float) -> dict:
        """Load what :meth:`snapshot` gave (in another REPL) into this fresh one; ``{"restored": bool,
        "reason"}``."""
        try:
            if not isinstance(text, str) or len(text) > REPL_STATE_BYTES * 4 // 3 + 4:
                raise ValueError("the REPL state is not base64 text of at most the state size")
            data = base64.b64decode(text.encode("ascii"), validate=True)
            names, random_state = _guarded(lambda: load_state(data, self.namespace["apis"]), seconds)
        except BaseException as exc:  # noqa: BLE001 - reported to the client, which replays instead
            return {"restored": False, "reason": _short_reason(exc)}
        random.setstate(random_state)
        self.namespace.update(names)
        return {"restored": True, "reason": ""}

    def execute(self, code: str, seconds: float, refusal: str | None = None) -> dict:
        code = code.strip()
        if not code:
            return {"output": "No code available to execute.", "error": True}
        reason = check_code(code) or refusal
        if reason is not None:
            return {"output": "Execution failed. Traceback:\n" + reason, "error": True}
        try:
            compiled = compile(code, "<agent>", "exec")
        except (SyntaxError, ValueError) as exc:
            if isinstance(exc, SyntaxError):
                text = f"Syntax error in line {exc.lineno}:\n{(exc.text or '').rstrip()}\nMessage: {exc.msg}"
            else:
                text = f"ValueError: {exc}"
            return {"output": "Execution failed. Traceback:\n" + text, "error": True}
        except (MemoryError, RecursionError) as exc:
            return {
                "output": f"Execution failed. Traceback:\n{type(exc).__name__}: code nested too deeply",
                "error": True,
            }
        writer = _CappedWriter(OUTPUT_CAP)
        error = False
        old_stdout, old_stderr = sys.stdout, sys.stderr
        old_handler = signal.signal(signal.SIGALRM, _raise_timeout)
        sys.stdout = sys.stderr = writer
        try:
            try:
                _run_agent_code(compiled, self.namespace, seconds)
            except StepTimeout:
                error = True
                writer.write(f"Execution failed. Traceback:\nExecution timed out after {seconds:g} seconds.")
            except MemoryError:
                error = True
                writer.write(
                    f"Execution failed. Traceback:\nMemoryError: the step exceeded the memory limit "
                    f"({self.memory_mb} MB)."
                )
            except BaseException as exc:  # noqa: BLE001 - every agent error becomes an observation
                error = True
                writer.write("Execution failed. Traceback:\n" + _agent_traceback(exc, seconds))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            sys.stdout, sys.stderr = old_stdout, old_stderr
        output = writer.getvalue()
        if not output.strip():
            output = "Execution successful."
        return {"output": output, "error": error}


def _run_agent_code(compiled: Any, namespace: dict, seconds: float) -> None:
    """Run ``compiled`` with the audit hook armed and the step's alarm set."""
    signal.setitimer(signal.ITIMER_REAL, seconds)
    _AGENT_RUNNING[0] = True
    try:
        exec(compiled, namespace)
    finally:
        _AGENT_RUNNING[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _raise_timeout(signum: int, frame: Any) -> None:
    raise StepTimeout()


def _agent_traceback(exc: BaseException, seconds: float) -> str:
    """The agent's lines of the traceback and the exception; the exception's own ``__str__`` (agent code,
    possibly) runs under a short alarm."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<agent>"]
    lines = [f"  line {f.lineno}" for f in frames[-3:]]
    signal.setitimer(signal.ITIMER_REAL, max(0.5, min(2.0, seconds)))
    try:
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    except BaseException:  # noqa: BLE001 - a failing or endless __str__
        message = f"{type(exc).__name__}: <the exception could not be shown>"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return "\n".join([*lines, message]) if lines else message


# ------------------------------------------------------------------------------------ the REPL's state
# Modules whose classes and functions a REPL state may hold (their public names, and the private functions
# pickle rebuilds some of their values with): the agent's importable modules and the modules their values
# are rebuilt from. Never the agent's own classes or functions (module ``__agent__``): agent code.
PICKLE_MODULES = ALLOWED_MODULES | {"builtins", "copyreg", "_collections_abc", "zoneinfo"}
PICKLE_BUILTINS = frozenset(
    {
        "object", "bool", "int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple", "dict",
        "set", "frozenset", "range", "slice", "map", "filter", "zip", "enumerate", "reversed", "iter",
        "getattr",
    }
)
PICKLE_FUNCTIONS = frozenset({("copyreg", "_reconstructor"), ("re", "_compile")})


class _StatePickler(pickle.Pickler):
    """Pickles REPL values: modules and the ``apis`` proxy by name, library values by their own reduction;
    anything defined by agent code (a function, a class, an instance of one) is refused."""

    def __init__(self, file: io.BytesIO, apis: dict) -> None:
        super().__init__(file, protocol=5)
        self.names: dict[int, tuple] = {id(apis): ("apis",)}
        for app, munch in apis.items():
            self.names[id(munch)] = ("app", app)
            for api, function in munch.items():
                self.names[id(function)] = ("api", app, api)

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is type(sys):
            name = getattr(obj, "__name__", "")
            if name not in ALLOWED_MODULES:
                raise pickle.PicklingError(f"the module {name!r} is not one the agent may import")
            return ("module", name)
        return self.names.get(id(obj))

    def reducer_override(self, obj: Any) -> Any:
        by_name = isinstance(obj, type) or type(obj) in (types.FunctionType, types.BuiltinFunctionType)
        owner = obj if by_name else type(obj)  # a class or function is pickled by its module and name
        if not _picklable_module(str(getattr(owner, "__module__", None) or "")):
            raise pickle.PicklingError(
                f"{getattr(owner, '__qualname__', '?')} is defined by the agent's code or is no library value"
            )
        return NotImplemented


def _picklable_module(module: str) -> bool:
    """Whether classes of ``module`` may be in a REPL state (``_functools`` counts as ``functools``)."""
    root = module.split(".")[0]
    return root in PICKLE_MODULES or root.lstrip("_") in PICKLE_MODULES


class _StateUnpickler(pickle.Unpickler):
    """Loads a REPL state: only public names of :data:`PICKLE_MODULES` (a few builtins), the rebuilding
    functions of :data:`PICKLE_FUNCTIONS`, and modules and the ``apis`` proxy by name."""

    def __init__(self, file: io.BytesIO, apis: dict) -> None:
        super().__init__(file)
        self.apis = apis

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or not pid or not all(isinstance(part, str) for part in pid):
            raise pickle.UnpicklingError("a malformed reference")
        if pid == ("apis",):
            return self.apis
        if pid[0] == "app" and len(pid) == 2:
            return self.apis[pid[1]]
        if pid[0] == "api" and len(pid) == 3:
            return self.apis[pid[1]][pid[2]]
        if pid[0] == "module" and len(pid) == 2:
            return _guarded_import(pid[1], fromlist=("*",)) if "." in pid[1] else _guarded_import(pid[1])
        raise pickle.UnpicklingError("an unknown reference")

    def find_class(self, module: str, name: str) -> Any:
        if not _picklable_module(module) or "." in name:
            raise pickle.UnpicklingError(f"{module}.{name} may not be loaded")
        if module == "builtins":
            if name == "getattr":
                return _getattr_of_class
            found = getattr(builtins, name, None)
            if name in PICKLE_BUILTINS or isinstance(found, type) and issubclass(found, BaseException):
                return found
            raise pickle.UnpicklingError(f"builtins.{name} may not be loaded")
        if name.startswith("_") and (module, name) not in PICKLE_FUNCTIONS:
            raise pickle.UnpicklingError(f"{module}.{name} may not be loaded")
        return super().find_class(module, name)


def _getattr_of_class(owner: Any, name: str) -> Any:
    """``getattr`` as pickle uses it to rebuild a value (``Timezone._unpickle``): of a class, no dunder."""
    if not isinstance(owner, type) or not isinstance(name, str) or name.startswith("__"):
        raise pickle.UnpicklingError("getattr is only for a class's own rebuilding function")
    return getattr(owner, name)


def dump_state(namespace: dict) -> bytes:
    """The agent's variables (the namespace without ``__builtins__``) and the ``random`` state, pickled by a
    pickler that names modules and the ``apis`` proxy and refuses what agent code defined, and compressed; at
    most :data:`REPL_STATE_BYTES`, and checked to load again.

    Raises:
        pickle.PicklingError: a value cannot be carried (a function or class of the agent's, a generator).
        pickle.UnpicklingError: a value would not load in a fresh REPL (a builtin function such as ``print``).
        ValueError: the state is larger than :data:`REPL_STATE_BYTES`.
    """
    names = {k: v for k, v in namespace.items() if k not in ("__builtins__", "__name__")}
    buffer = io.BytesIO()
    _StatePickler(buffer, namespace["apis"]).dump((names, random.getstate()))
    data = zlib.compress(buffer.getvalue(), 6)
    if len(data) > REPL_STATE_BYTES:
        raise ValueError(f"the REPL's variables take {len(data)} bytes, more than {REPL_STATE_BYTES}")
    load_state(data, namespace["apis"])  # what a fresh REPL will do with it: it must load there too
    return data


def load_state(data: bytes, apis: dict) -> tuple[dict, tuple]:
    """The variables and ``random`` state of :func:`dump_state`'s ``data`` (checked, nothing else loaded)."""
    inflate = zlib.decompressobj()
    raw = inflate.decompress(data, 8 * REPL_STATE_BYTES)
    if inflate.unconsumed_tail or not inflate.eof:
        raise ValueError("the REPL state is truncated or inflates beyond its limit")
    names, random_state = _StateUnpickler(io.BytesIO(raw), apis).load()
    if not isinstance(names, dict) or not all(isinstance(k, str) for k in names) or "__builtins__" in names:
        raise ValueError("the REPL state is not a namespace")
    random.Random().setstate(random_state)  # raises on a malformed state before anything is changed
    return names, random_state


def _guarded(work: Any, seconds: float) -> Any:
    """Run ``work()`` as agent code runs: the audit hook armed, under the step's alarm, output discarded."""
    old_stdout, old_stderr = sys.stdout, sys.stderr
    old_handler = signal.signal(signal.SIGALRM, _raise_timeout)
    sys.stdout = sys.stderr = _CappedWriter(0)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        _AGENT_RUNNING[0] = True
        return work()
    finally:
        _AGENT_RUNNING[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        sys.stdout, sys.stderr = old_stdout, old_stderr


def _short_reason(exc: BaseException) -> str:
    if isinstance(exc, StepTimeout):
        return "it took too long"
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except Exception:  # noqa: BLE001 - an exception whose text fails
        return type(exc).__name__


# ------------------------------------------------------------------------------------------- the wall
def current_address_space() -> int | None:
    """This process's address space in bytes (``/proc/self/statm``), or None where there is no /proc."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


def apply_limits(memory_mb: int, cpu_seconds: int, base_bytes: int) -> None:
    """The resource limits (soft = hard, so they cannot be raised again)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing to a file fails (EFBIG) instead of killing
    address_space = (current_address_space() or base_bytes) + memory_mb * 1024 * 1024
    for limit, value in (
        (resource.RLIMIT_AS, address_space),
        (resource.RLIMIT_CPU, max(1, int(cpu_seconds))),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_NOFILE, NOFILE_LIMIT),
        (resource.RLIMIT_NPROC, 0),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))


def import_pyseccomp() -> Any:
    """``pyseccomp``, loaded without ``ctypes.util.find_library`` (the sandbox has no ldconfig to run)."""
    import ctypes.util

    known = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}
    ctypes.util.find_library = lambda name: known.get(name)  # type: ignore[assignment]
    import pyseccomp

    return pyseccomp


def load_seccomp() -> None:
    """Deny :data:`DENIED_SYSCALLS` (EPERM) and signals to any process but this one."""
    import errno

    pyseccomp = import_pyseccomp()
    deny = pyseccomp.ERRNO(errno.EPERM)
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):  # a call this kernel / libseccomp does not know
            pass
    me = os.getpid()
    for name in ("kill", "tkill", "tgkill"):
        rules.add_rule(deny, name, pyseccomp.Arg(0, pyseccomp.NE, me))
    rules.load()


def _probe_checks(sandboxed: bool) -> list[str]:
    """What must fail in the set-up process (empty: the wall holds)."""
    import socket

    problems = []
    for name, attempt in (
        ("fork", os.fork),
        ("exec", lambda: os.execv(sys.executable, [sys.executable, "-c", "pass"])),
        ("socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
        ("signal to another process", lambda: os.kill(1 if os.getpid() != 1 else 2, 0)),
        ("System V shared memory", _shared_memory_segment),
    ):
        try:
            result = attempt()
        except PermissionError:
            continue
        except OSError as exc:
            problems.append(f"{name} failed with {exc!r} instead of EPERM")
            continue
        if result == 0:  # the child of a fork that was not stopped
            os._exit(0)
        problems.append(f"{name} was allowed")
    if sandboxed:
        if os.getuid() != SANDBOX_UID:
            problems.append(f"runs as uid {os.getuid()}, not {SANDBOX_UID}")
        if os.path.exists("/etc/passwd"):
            problems.append("/etc/passwd is visible")
    return problems


def _shared_memory_segment() -> str:
    """Create (and remove again) a System V shared memory segment; OSError (EPERM under the filter) if not."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(0, 4096, 0o600)  # IPC_PRIVATE
    if segment < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    libc.shmctl(segment, 0, None)  # IPC_RMID
    return "created"


# --------------------------------------------------------------------------------------------- main
def _renumber(fds: tuple[int, int]) -> None:
    """Move the inherited channel fds to :data:`CTRL_FD` and :data:`API_FD` (in any order)."""
    import fcntl

    copies = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]  # above both targets
    for fd in fds:
        os.close(fd)
    for copy, target in zip(copies, (CTRL_FD, API_FD), strict=True):
        os.dup2(copy, target, inheritable=False)
        os.close(copy)


def serve(sandboxed: bool, base_bytes: int) -> None:
    """Set up from the client's ``init``, arm the wall, then run ``execute`` requests until the end."""
    control = LineChannel(CTRL_FD)
    init = control.receive()
    if not isinstance(init, dict) or init.get("op") != "init":
        raise SystemExit("the first control message must be init")
    memory_mb = int(init["memory_mb"])
    freeze_clock(init["clock"])
    random.seed(int(init["seed"]))
    client = ApiClient(LineChannel(API_FD))
    repl = Repl(build_apis(init["api_names"], client), memory_mb)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # agent code writing to the standard streams reaches nobody
        os.dup2(devnull, fd)
    os.close(devnull)
    apply_limits(memory_mb, int(init["cpu_seconds"]), base_bytes)
    if sandboxed:
        load_seccomp()
    sys.addaudithook(_audit)
    control.send({"ready": True})
    while True:
        request = control.receive()
        if not isinstance(request, dict):
            continue
        op, seconds = request.get("op"), float(request.get("seconds") or 10.0)
        if op == "execute":
            refusal = request.get("refusal")
            reply = repl.execute(
                str(request.get("code", "")), seconds, refusal if isinstance(refusal, str) else None
            )
        elif op == "snapshot":
            reply = repl.snapshot(seconds)
        elif op == "restore":
            reply = repl.restore(request.get("state"), seconds)
        else:
            continue
        control.send({"seq": request.get("seq"), **reply})


def freeze_clock(clock: Any) -> None:
    """Stop the clock at the world's date and time, as AppWorld does (``freezegun``): ``datetime``'s
    ``now``/``today``, ``pendulum.now`` and ``time.time`` all read it, so a replay prints the same dates."""
    import datetime

    import freezegun

    freezegun.freeze_time(datetime.datetime(*[int(part) for part in clock])).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--ctrl-fd", type=int, default=None)
    parser.add_argument("--api-fd", type=int, default=None)
    parser.add_argument("--site", action="append", default=[], help="a folder with pendulum and pyseccomp")
    parser.add_argument(
        "--base-bytes",
        type=int,
        default=64 * 1024 * 1024,
        help="this process's address space where /proc is absent (measured by the probe)",
    )
    parser.add_argument("--no-seccomp", action="store_true", help="unsafe_no_sandbox: no seccomp filter")
    parser.add_argument("--probe", action="store_true", help="check the wall and print one JSON line")
    args = parser.parse_args(argv)
    for site in reversed(args.site):
        sys.path.insert(0, site)
    _CODE_ROOTS[:] = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *args.site)})
    exec(PREAMBLE, {})  # the preamble's modules, loaded while the process waits for its episode
    import freezegun  # noqa: F401 - likewise (freeze_clock starts it at the init)
    sandboxed = not args.no_seccomp
    if sandboxed:
        import_pyseccomp()
    if args.probe:
        size = current_address_space()
        try:
            apply_limits(64, 60, size or args.base_bytes)
            if sandboxed:
                load_seccomp()
            problems = _probe_checks(sandboxed)
        except Exception as exc:  # noqa: BLE001 - reported to the client
            problems = [f"{type(exc).__name__}: {exc}"]
        print(json.dumps({"ok": not problems, "problems": problems, "address_space": size}), flush=True)
        return
    _renumber((args.ctrl_fd, args.api_fd))
    try:
        serve(sandboxed, args.base_bytes)
    except (EOFError, KeyboardInterrupt):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
