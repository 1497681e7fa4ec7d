"""The agent REPL's pieces that need no process: the code check, the apis proxy, its errors, the channel."""

from __future__ import annotations

import copy
import importlib
import json
import os
import pickle
import random
import threading
import zlib

import pytest

from agentgym_credit.envs.appworld import agent_worker
from agentgym_credit.envs.appworld.agent_worker import (
    ApiCollection,
    LineChannel,
    build_apis,
    check_code,
    remote_error,
)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import os", "Usage of the module 'os' is not allowed."),
        ("from subprocess import run", "Usage of the module 'subprocess' is not allowed."),
        ("print(open('/etc/passwd'))", "Usage of 'open' is not allowed."),
        ("import random\nrandom._os", "Usage of the attribute '_os' is not allowed."),
        ("import calendar\ncalendar.sys", "Usage of the attribute 'sys' is not allowed."),
        ("x.__class__", "Usage of the attribute '__class__' is not allowed."),
    ],
)
def test_check_code_refuses_what_the_allow_list_does_not_hold(code, reason) -> None:
    assert check_code(code) == reason


def test_check_code_passes_ordinary_code_and_leaves_syntax_errors_to_exec() -> None:
    assert (
        check_code("import json, math\nfrom collections import Counter\nprint(json.dumps({'a': math.pi}))")
        is None
    )
    assert check_code("def broken(:\n  pass") is None


def test_remote_errors_keep_their_type_name_module_and_message() -> None:
    key_error = remote_error({"module": "builtins", "name": "KeyError", "args": ["a"], "text": "'a'"})
    assert type(key_error) is KeyError and str(key_error) == "'a'"
    http = remote_error(
        {
            "module": "fastapi.exceptions",
            "name": "HTTPException",
            "args": None,
            "text": "422: No app named 'x' found.",
        }
    )
    assert isinstance(http, Exception) and type(http).__module__ == "fastapi.exceptions"
    assert type(http).__qualname__ == "HTTPException" and str(http) == "422: No app named 'x' found."
    assert type(remote_error({"module": "fastapi.exceptions", "name": "HTTPException", "text": "y"})) is type(
        http
    )
    # a builtin that cannot be rebuilt from its arguments keeps the message
    odd = remote_error({"module": "builtins", "name": "UnicodeDecodeError", "args": [1], "text": "bad bytes"})
    assert type(odd).__name__ == "UnicodeDecodeError" and str(odd) == "bad bytes"


def test_the_apis_proxy_has_appworlds_names_and_errors() -> None:
    calls = []

    class Recorder:
        def call(self, app, api, kwargs):
            calls.append((app, api, kwargs))
            return {"ok": app}

    apis = build_apis({"venmo": ["login", "show_profile"], "supervisor": ["complete_task"]}, Recorder())
    assert isinstance(apis, ApiCollection) and list(apis.keys()) == ["venmo", "supervisor"]
    assert str(type(apis)) == "<class 'appworld.collections.apis.ApiCollection'>"
    assert apis.venmo.login(username="a", password="b") == {"ok": "venmo"}
    assert calls == [("venmo", "login", {"username": "a", "password": "b"})]
    assert apis["venmo"]["show_profile"].__qualname__ == "_wrap_api_request.<locals>._api_request"
    with pytest.raises(Exception, match="422: No app named 'nope' found.") as unknown_app:
        _ = apis.nope
    assert type(unknown_app.value).__name__ == "HTTPException"
    with pytest.raises(Exception, match="422: No API named 'nope' found in the venmo app."):
        _ = apis.venmo.nope
    with pytest.raises(TypeError, match=r"_api_request\(\) takes 0 positional arguments but 1 was given"):
        apis.venmo.login("a")
    apis.supervisor.complete_task = None  # the agent's own copy only
    assert apis.supervisor.complete_task is None and "complete_task" in apis["supervisor"]


def test_values_json_cannot_carry_travel_as_their_text() -> None:
    encoded = json.loads(json.dumps({"x": {1, 2}}, default=agent_worker._encode_opaque))
    assert encoded == {"x": {agent_worker._OPAQUE_KEY: ["set", "{1, 2}"]}}


def test_line_channel_caps_what_it_reads_and_survives_junk() -> None:
    read_end, write_end = os.pipe()
    try:
        channel = LineChannel(read_end, cap=1000)
        data = b'{"a": 1}\n' + b"x" * 1500 + b"\n" + b'{"b": 2}\n' + b"y" * 300_000 + b"\n"
        writer = threading.Thread(target=os.write, args=(write_end, data))  # more than a pipe holds
        writer.start()
        assert channel.receive() == {"a": 1}
        with pytest.raises(ValueError, match="longer than 1000 bytes"):
            channel.receive()
        assert channel.receive() == {"b": 2}  # the over-long line was dropped whole
        with pytest.raises(ValueError, match="longer than 1000 bytes"):
            channel.receive()  # one that arrives in several reads too
        writer.join()
        os.close(write_end)
        write_end = -1
        with pytest.raises(EOFError):
            channel.receive()
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_the_worker_and_the_world_server_agree_on_the_wire() -> None:
    """The two sides run in different interpreters and share no module: their constants must match."""
    from agentgym_credit.envs.appworld import engine_server

    assert agent_worker.MAX_REQUEST_BYTES == engine_server.MAX_REQUEST_BYTES
    assert agent_worker._OPAQUE_KEY == engine_server._OPAQUE_KEY
    set_type = engine_server._decode_opaque(
        json.loads(json.dumps({"x": {1, 2}}, default=agent_worker._encode_opaque))
    )["x"]
    assert str(set_type) == "{1, 2}"
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        json.dumps(set_type)  # what an HTTP JSON body of a set does


# ------------------------------------------------------------------------------------ the REPL's state
def _namespace(apis: ApiCollection) -> dict:
    import collections
    import datetime
    import decimal
    import json as json_module
    import re

    return {
        "__builtins__": {"print": print},
        "__name__": "__agent__",
        "apis": apis,
        "venmo": apis.venmo,
        "login": apis.venmo.login,
        "json": json_module,
        "abc": importlib.import_module("collections.abc"),
        "Counter": collections.Counter,
        "deepcopy": copy.deepcopy,
        "counts": collections.Counter("hello"),
        "groups": collections.defaultdict(list, {"a": [1]}),
        "when": datetime.datetime(2023, 5, 18, 12, tzinfo=datetime.UTC),
        "amount": decimal.Decimal("22.50"),
        "pattern": re.compile(r"\d+"),
        "people": [{"email": "a@b.c", "seen": {"x", "y"}}],
        "error": KeyError("missing"),
    }


def test_a_repl_state_round_trips_library_values_modules_and_the_apis_proxy() -> None:
    apis = build_apis({"venmo": ["login"], "supervisor": ["complete_task"]}, object())
    random.seed(7)
    random.random()
    data = agent_worker.dump_state(_namespace(apis))
    expected_next = random.random()
    fresh = build_apis({"venmo": ["login"], "supervisor": ["complete_task"]}, object())
    names, random_state = agent_worker.load_state(data, fresh)
    assert "__builtins__" not in names and "__name__" not in names
    assert names["apis"] is fresh and names["venmo"] is fresh.venmo and names["login"] is fresh.venmo.login
    assert names["json"] is json and names["abc"] is importlib.import_module("collections.abc")
    original = _namespace(apis)
    for key in ("counts", "groups", "when", "amount", "pattern", "people"):
        assert names[key] == original[key], key
    assert type(names["groups"]) is type(original["groups"]) and names["groups"]["new"] == []
    assert type(names["error"]) is KeyError and names["error"].args == ("missing",)
    random.setstate(random_state)
    assert random.random() == expected_next  # the REPL's random state travels with its variables


class _AgentClass:  # what a class defined in the agent's code looks like
    reduced = False

    def __reduce__(self):
        _AgentClass.reduced = True
        return (os.system, ("id",))


_AgentClass.__module__ = "__agent__"


def _agent_function():
    return 1


_agent_function.__module__ = "__agent__"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (_AgentClass(), "defined by the agent's code"),
        (_agent_function, "defined by the agent's code"),
        (_AgentClass, "defined by the agent's code"),
        ((x for x in range(3)), "cannot pickle 'generator' object"),
        (print, "builtins.print may not be loaded"),  # pickles, but would not load in a fresh REPL
        (os, "the module 'os' is not one the agent may import"),
    ],
)
def test_a_repl_state_refuses_agent_code_and_what_would_not_load(value, reason) -> None:
    apis = build_apis({"venmo": ["login"]}, object())
    with pytest.raises(Exception, match=reason):
        agent_worker.dump_state({"apis": apis, "value": value})
    assert not _AgentClass.reduced  # the agent's own reduction never ran


class _Gadget:  # a forged state: os.system called by the unpickler
    def __reduce__(self):
        return (os.system, ("id",))


def _state_bytes(payload: bytes) -> bytes:
    return zlib.compress(payload)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (pickle.dumps(({"x": _Gadget()}, random.getstate())), "posix.system may not be loaded"),
        (b"\x80\x05cbuiltins\neval\n(V1\ntR.", "builtins.eval may not be loaded"),
        (b"\x80\x05crandom\n_os\n.", "random._os may not be loaded"),
        (b"\x80\x05cbuiltins\ngetattr\n(crandom\nRandom\nV__init__\ntR.", "getattr is only for"),
        (b"\x80\x05(V__builtins__\nK\x01d(K\x01t\x86.", "not a namespace"),
    ],
)
def test_a_forged_repl_state_is_refused_before_anything_runs(payload, reason) -> None:
    apis = build_apis({"venmo": ["login"]}, object())
    with pytest.raises(Exception, match=reason):
        agent_worker.load_state(_state_bytes(payload), apis)


def test_a_repl_state_that_inflates_beyond_its_limit_is_refused() -> None:
    bomb = zlib.compress(b"\0" * (8 * agent_worker.REPL_STATE_BYTES + 1), 9)
    with pytest.raises(ValueError, match="inflates beyond its limit"):
        agent_worker.load_state(bomb, build_apis({}, object()))
