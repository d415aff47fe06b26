"""``engram mcp`` over stdio is served without the MCP SDK (issue 26, finding 8: importing the
SDK cost each fresh start 0.5-0.9 s). These tests hold it to the SDK: the same script of
messages sent to ``engram mcp`` and to the SDK's own server over the same tools
(``build_server(...).run("stdio")``) gets the same answers, schemas and errors included; and
to the JSON-RPC and MCP stdio rules where the SDK is silent (a bad line is answered, an
over-long one is refused unread, a cancelled call is dropped, calls read before end of input
finish). The SDK's own client and the TypeScript SDK's client drive it in test_mcp.py and
tests/interop/."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.harness.mcp_stdio import MAX_LINE, PROTOCOL_VERSIONS, StdioServer
from engram.harness.mcp_tools import TOOLS
from engram.protocol.answers import Written
from tests.e2e.processes import ENGRAM
from tests.e2e.test_mcp import _env

SDK_SERVER = (
    "import sys\n"
    "from engram.harness.mcp_server import build_server\n"
    "from engram.harness.target import target_from\n"
    "from engram.cli.entry import open_embedded\n"
    "t = target_from(server=None, key_file=sys.argv[1], log_key=None)\n"
    "build_server(lambda: t.open(open_embedded, lite=True)).run('stdio')\n"
)


def _init(env: dict[str, str], tmp: Path) -> Path:
    subprocess.run([ENGRAM, "init", "--origin", "mcp.example/log"], env=env, check=True, capture_output=True)
    key = tmp / "bob.key"
    subprocess.run(
        [ENGRAM, "agent", "create", "bob", "--key-file", str(key)], env=env, check=True, capture_output=True
    )
    return key


def _exchange(cmd: list[str], env: dict[str, str], lines: list[bytes]) -> list[dict[str, Any]]:
    """Each answer ``cmd`` prints to ``lines``, sent one at a time (a request's answer read
    before the next line is sent)."""
    proc = subprocess.Popen(
        cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers = []
    try:
        for line in lines:
            proc.stdin.write(line + b"\n")
            proc.stdin.flush()
            if b'"id"' in line:
                answers.append(json.loads(proc.stdout.readline()))
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return answers


def _req(ident: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode()


def _call(ident: int, tool: str, arguments: dict[str, Any]) -> bytes:
    return _req(ident, "tools/call", {"name": tool, "arguments": arguments})


SCRIPT = [
    _req(
        1,
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    ),
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
    _req(2, "ping"),
    _req(3, "tools/list"),
    _req(4, "resources/list"),
    _req(5, "resources/templates/list"),
    _req(6, "prompts/list"),
    _req(7, "nope/nope"),
    _req(8, "logging/setLevel", {"level": "info"}),
    # bad arguments: refused by the schema, each field named, nothing written
    _call(10, "memory_write", {"content": ""}),
    _call(11, "memory_write", {}),
    _call(12, "memory_write", {"content": "x", "category": "SECRET", "confidence": 101}),
    _call(13, "memory_write", {"content": "x" * 4001}),
    _call(14, "session_turn", {"session": "../etc", "role": "user", "content": "hi"}),
    _call(15, "memory_show", {"ref": "12"}),
    _call(16, "nosuch", {}),
    _req(17, "tools/call", {}),
    # writes, lax input as the SDK takes it: "3" for an int, a JSON string for a list, extras ignored
    _call(20, "memory_write", {"content": "The user prefers tea.", "category": "PREFERENCE"}),
    _call(
        21,
        "memory_write",
        {"content": "Staging restarts nightly.", "category": "LEARNING", "tags": '["ops"]'},
    ),
    _call(22, "memory_write", {"content": "Deploys need a ticket.", "confidence": "90", "unknown": 1}),
    _call(23, "session_open", {"title": "Sprint", "session": "s-1"}),
    _call(24, "session_turn", {"session": "s-1", "role": "user", "content": "We ship on Fridays."}),
    _call(25, "memory_show", {"ref": "99.0"}),
    _call(26, "memory_recall", {"query": "tea", "limit": "3"}),
    _call(
        27,
        "record_outcome",
        {"kind": "pact.outcome", "body": {"pact": "p1", "result": "fulfilled", "quality": 90}},
    ),
    _call(
        28, "memory_supersede", {"ref": "2.0", "content": "The user prefers green tea.", "reason": "said so"}
    ),
    _req(30, "resources/read", {"uri": "engram://agent"}),
    _req(31, "resources/read", {"uri": "engram://nope"}),
    _req(32, "resources/read", {}),
]


def test_the_stdio_server_answers_as_the_sdk_server_does(tmp_path: Path) -> None:
    """The same script, two fresh logs made the same way: every answer equal, with the
    log keys (random per log) the only difference."""
    answers = []
    for side, cmd in (("ours", [ENGRAM, "mcp"]), ("sdk", [sys.executable, "-c", SDK_SERVER])):
        env = _env(tmp_path / side)
        key = _init(env, tmp_path / side)
        cmd = [*cmd, "--key-file", str(key)] if side == "ours" else [*cmd, str(key)]
        log_key = subprocess.run(
            [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        got = _exchange(cmd, env, SCRIPT)
        answers.append(json.loads(json.dumps(got).replace(log_key, "<log key>")))
    ours, sdk = answers
    assert [a["id"] for a in ours] == [a["id"] for a in sdk]
    for mine, theirs in zip(ours, sdk, strict=True):
        assert mine == theirs, f"answer {mine['id']} differs"
    by_id = {a["id"]: a for a in ours}
    assert [t["name"] for t in by_id[3]["result"]["tools"]] == list(TOOLS)
    assert by_id[20]["result"]["structuredContent"]["ref"] == "2.0"
    assert all(by_id[i]["result"]["isError"] for i in (10, 11, 12, 13, 14, 15, 16, 25))
    assert "category" in by_id[12]["result"]["content"][0]["text"]


def test_protocol_versions_are_the_sdks_handshake_versions() -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == PROTOCOL_VERSIONS
    assert PROTOCOL_VERSIONS[-1] == LATEST_HANDSHAKE_VERSION


class _Never:
    """A memory factory for protocol tests that must not reach the memory."""

    def __call__(self) -> Any:
        raise AssertionError("the memory was opened")


def _serve(lines: list[bytes], factory: Any = None) -> list[dict[str, Any]]:
    out = io.BytesIO()
    StdioServer(factory or _Never()).serve(io.BytesIO(b"".join(lines)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_bad_lines_get_json_rpc_errors_and_the_server_reads_on() -> None:
    answers = _serve(
        [
            b"{not json\n",
            b"\xff\xfe\n",
            b"[]\n",
            b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]\n',
            b'{"jsonrpc": "2.0", "id": 2}\n',
            b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}\n',
            b'{"jsonrpc": "2.0", "id": [4], "method": "ping"}\n',
            b'{"jsonrpc": "2.0", "id": 5, "method": 7}\n',
            b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": [1]}\n',
            b'{"jsonrpc": "2.0", "id": 7, "result": {}}\n',  # a response: nothing to answer
            b'{"jsonrpc": "2.0", "method": "notifications/whatever"}\n',
            b"\n",
            b'{"jsonrpc": "2.0", "id": "last", "method": "ping"}\n',
        ]
    )
    codes = [(a["id"], a.get("error", {}).get("code")) for a in answers]
    assert codes == [
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (None, -32600),
        (2, -32600),
        (3, -32600),
        (None, -32600),
        (5, -32600),
        (6, -32602),
        ("last", None),
    ]
    assert answers[-1]["result"] == {}


def test_an_over_long_line_is_refused_unread_and_the_next_is_answered() -> None:
    huge = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * (MAX_LINE + 10) + b'"}}\n'
    )
    answers = _serve([huge, b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n'])
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == -32600
    assert str(MAX_LINE) in answers[0]["error"]["message"]
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_initialize_negotiates_a_known_version_else_the_newest() -> None:
    server = StdioServer(_Never())
    for asked, got in (
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", PROTOCOL_VERSIONS[-1]),
        (None, PROTOCOL_VERSIONS[-1]),
    ):
        answer = server.handle(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": asked}}
        )
        assert answer is not None and answer["result"]["protocolVersion"] == got


class _SlowMemory:
    """Stands in for AgentMemory: each write takes a while and is recorded."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.started = threading.Event()

    def write(self, *, content: str, **_: Any) -> Written:
        self.started.set()
        time.sleep(0.3)
        self.written.append(content)
        return Written(index=len(self.written), ref=f"{len(self.written)}.0", duplicate=False)


def test_a_cancelled_call_that_has_not_started_is_dropped_and_the_rest_finish() -> None:
    """notifications/cancelled drops a queued call (no answer, nothing written); the call
    already running and those after it finish before the server exits at end of input;
    ping is answered while a call runs."""
    mem = _SlowMemory()
    r, w = __import__("os").pipe()
    out = io.BytesIO()
    server = StdioServer(lambda: mem)  # type: ignore[arg-type, return-value]
    with open(r, "rb", buffering=0) as reader, open(w, "wb", buffering=0) as stdin:
        t = threading.Thread(target=server.serve, args=(reader, out))
        t.start()
        stdin.write(_call(1, "memory_write", {"content": "first"}) + b"\n")
        assert mem.started.wait(10)
        stdin.write(_call(2, "memory_write", {"content": "second"}) + b"\n")
        stdin.write(_call(3, "memory_write", {"content": "third"}) + b"\n")
        stdin.write(
            json.dumps(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
            ).encode()
            + b"\n"
        )
        stdin.write(_req(4, "ping") + b"\n")
        stdin.close()
        t.join(30)
    assert not t.is_alive()
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["id"] for a in answers] == [4, 1, 3]  # ping first, 2 never answered
    assert [a["result"].get("structuredContent") for a in answers[1:]] == [
        {"index": 1, "ref": "1.0", "duplicate": False, "redacted": 0},
        {"index": 2, "ref": "2.0", "duplicate": False, "redacted": 0},
    ]
    assert mem.written == ["first", "third"]


def test_a_failing_memory_is_a_tool_error_and_the_server_lives_on() -> None:
    def broken() -> Any:
        raise RuntimeError("boom")

    answers = sorted(
        _serve([_call(1, "memory_recall", {"query": "x"}) + b"\n", _req(2, "ping") + b"\n"], broken),
        key=lambda a: a["id"],
    )
    assert answers[0]["result"]["isError"] is True
    problem = json.loads(answers[0]["result"]["content"][0]["text"].split(": ", 1)[1])
    assert problem["type"].endswith("/internal") and problem["detail"] == "boom"
    assert answers[1]["result"] == {}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | JSON,
        "id": st.integers() | st.text(max_size=4) | JSON,
        "method": st.sampled_from(["ping", "initialize", "tools/list", "tools/call", "resources/read", "x"])
        | JSON,
        "params": st.fixed_dictionaries(
            {}, optional={"name": st.sampled_from(list(TOOLS)) | JSON, "arguments": JSON, "uri": JSON}
        )
        | JSON,
    },
)


@given(MESSAGES | JSON)
@settings(max_examples=300, deadline=None)
def test_any_message_gets_a_well_formed_answer_or_none(message: Any) -> None:
    """Fuzz: no message raises; each answer is a JSON-RPC 2.0 result or error that
    serialises, and the memory is never opened for a call whose arguments are refused."""

    class Refuses:
        def __call__(self) -> Any:
            from engram.protocol.errors import ConfigError

            raise ConfigError("no memory here")

    answer = StdioServer(Refuses()).handle(message)
    if answer is None:
        return
    json.dumps(answer)
    assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer)
    if "error" in answer:
        assert isinstance(answer["error"]["code"], int) and answer["error"]["message"]


def test_the_stdio_server_does_not_import_the_mcp_sdk(tmp_path: Path) -> None:
    """Regression (issue 26, finding 8): a fresh ``engram mcp`` spent 0.5-0.9 s importing the
    MCP SDK before its first call. The stdio path answers a whole call without it."""
    env = _env(tmp_path)
    key = _init(env, tmp_path)
    code = (
        "import io, json, sys\n"
        "from engram.harness.mcp_stdio import StdioServer\n"
        "from engram.harness.target import target_from\n"
        "from engram.cli.entry import open_embedded\n"
        "t = target_from(server=None, key_file=sys.argv[1], log_key=None)\n"
        "out = io.BytesIO()\n"
        "msgs = [{'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {}},\n"
        "        {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/list'},\n"
        "        {'jsonrpc': '2.0', 'id': 3, 'method': 'tools/call', 'params': {'name': 'memory_recall', 'arguments': {'query': 'x'}}}]\n"
        "StdioServer(lambda: t.open(open_embedded, lite=True)).serve(io.BytesIO(b''.join(json.dumps(m).encode() + b'\\n' for m in msgs)), out)\n"
        "assert json.loads(out.getvalue().splitlines()[-1])['result']['isError'] is False\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'mcp', 'mcp_types', 'httpx', 'starlette', 'anyio'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(key)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("transport", ["stdio"])
def test_engram_mcp_without_pydantic_says_what_to_install(transport: str, tmp_path: Path) -> None:
    """The stdio server needs pydantic (the tools' schemas): without it, one line naming the
    install, exit 2, nothing on stdout."""
    code = (
        "import sys\n"
        "sys.modules['pydantic'] = None\n"
        "from engram.harness.cli import mcp_main\n"
        "sys.exit(mcp_main(['--transport', sys.argv[1]], None))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, transport], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "pydantic" in out.stderr and "engram-ledger" in out.stderr


@pytest.mark.parametrize("ref", ["007.0100", "01.0", "1.00", "12.100", "99999999999999999.0"])
def test_the_tools_take_only_refs_the_protocol_takes(ref: str) -> None:
    """Regression (issue 27, finding 3): the MCP tools' item-ref pattern was their own, and
    ``007.0100`` passed it but not the protocol's ``parse_ref``. The tools' patterns are the
    protocol's now: every such ref is refused by the schema, before the memory is opened."""
    from engram.protocol.errors import RejectedEventError
    from engram.protocol.schemas import parse_ref

    with pytest.raises(RejectedEventError):
        parse_ref(ref)
    server = StdioServer(_Never())
    for tool, args in (
        ("memory_show", {"ref": ref}),
        ("memory_supersede", {"ref": ref, "content": "x", "reason": "y"}),
    ):
        answer = server.handle(_msg(tool, args))
        assert answer is not None and answer["result"]["isError"] is True
        assert "validation error" in answer["result"]["content"][0]["text"]


def test_the_tools_schemas_use_the_protocols_rules() -> None:
    """Issue 27, finding 3."""
    from typing import get_args

    from engram.harness.mcp_tools import Category
    from engram.protocol.schemas import (
        CATEGORIES,
        MAX_CONTENT_CHARS,
        REF_JSON_PATTERN,
        SESSION_JSON_PATTERN,
    )

    assert get_args(Category) == CATEGORIES
    tools = {t["name"]: t["inputSchema"] for t in StdioServer(_Never()).list_tools()["tools"]}
    assert tools["memory_show"]["properties"]["ref"]["pattern"] == REF_JSON_PATTERN
    assert tools["session_turn"]["properties"]["session"]["pattern"] == SESSION_JSON_PATTERN
    assert tools["memory_write"]["properties"]["content"]["maxLength"] == MAX_CONTENT_CHARS


def _msg(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
