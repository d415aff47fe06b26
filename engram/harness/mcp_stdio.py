"""``engram mcp`` over stdio: the MCP handshake-era protocol, newline-delimited JSON-RPC 2.0.

A harness starts ``engram mcp`` as a child process, often once per session, and waits for
it before the model's first call. Importing the MCP SDK cost that start 0.5-0.9 s (issue 26,
finding 8), so this transport is served here, on the standard library and pydantic (already
there for the tools' schemas). It serves the tools and resources of
:mod:`engram.harness.mcp_tools`, the functions the SDK serves over streamable HTTP
(:mod:`engram.harness.mcp_server`); ``tests/e2e/test_mcp_stdio.py`` holds the two servers'
answers equal: ``initialize``, every list, every schema, tool results and tool errors.

What it speaks (MCP stdio transport, protocol revisions 2024-11-05 to 2025-11-25):

* one JSON-RPC message per line on stdin, each answer one line on stdout, nothing else on
  stdout; a line over :data:`MAX_LINE` bytes is refused before it is parsed, unread;
* ``initialize`` (the client's revision when this server knows it, else the newest),
  ``ping``, ``tools/list``, ``tools/call``, ``resources/list``, ``resources/read``,
  ``resources/templates/list``, ``prompts/list``; anything else is "Method not found"
  (a 2026-era client's ``server/discover`` probe falls back to ``initialize`` on it);
* ``notifications/cancelled`` drops a call that has not started; a started call finishes
  (its write is acknowledged to the log), and its answer is still sent;
* bad input gets the JSON-RPC error it calls for (parse error, invalid request, invalid
  params) and changes nothing; bad tool arguments are a tool error (``isError``) naming
  each field, as the SDK words them;
* calls run one at a time on a worker thread, in the order they came, so ``ping`` is
  answered while a long call (a session's distillation) runs; at end of input the calls
  already read finish before the process exits.
"""

from __future__ import annotations

import inspect
import json
import queue
import threading
from collections.abc import Callable
from typing import IO, Annotated, Any

from engram.client.agent_memory import AgentMemory
from engram.harness.mcp_tools import (
    INSTRUCTIONS,
    TITLE,
    Tool,
    ToolFailure,
    ToolSet,
    define,
    problem_json,
    server_version,
)

__all__ = ["MAX_LINE", "PROTOCOL_VERSIONS", "StdioServer", "serve"]

#: The protocol revisions the initialize handshake negotiates, oldest first (the SDK's
#: HANDSHAKE_PROTOCOL_VERSIONS; a test keeps them equal).
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: The longest message line read (a session turn is at most 32,000 characters: 128 KiB of
#: UTF-8, escaped at most 6x in JSON).
MAX_LINE = 1 << 20

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

_STOP = object()


class _Fault(Exception):
    """A JSON-RPC error answer: ``code``, ``message`` and optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class _Arguments:
    """One tool's argument model, built as the SDK builds it from the function's annotated
    parameters (``<tool>Arguments``), so the schema and the validation errors are the same."""

    def __init__(self, tool: Tool) -> None:
        from pydantic import BaseModel, Field, create_model

        fields: dict[str, Any] = {}
        for p in inspect.signature(tool.fn, eval_str=True).parameters.values():
            if hasattr(BaseModel, p.name):  # the SDK aliases these; no tool of ours needs it
                raise TypeError(f"{tool.name}: parameter {p.name} shadows a pydantic attribute")
            annotated: Any = Annotated[p.annotation, Field()]
            fields[p.name] = annotated if p.default is inspect.Parameter.empty else (annotated, p.default)
        self.model: Any = create_model(f"{tool.name}Arguments", **fields)
        self.fields: dict[str, Any] = self.model.model_fields

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = self.model.model_json_schema(by_alias=True)
        return out

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The validated keyword arguments (raises pydantic's ``ValidationError``). A string
        given for a list or object parameter is read as JSON first, as the SDK does for
        clients that send ``'["a", "b"]'``; unknown arguments are ignored, as there."""
        data = dict(arguments)
        for key, value in arguments.items():
            info = self.fields.get(key)
            if info is None or not isinstance(value, str) or info.annotation is str:
                continue
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                continue
            if not isinstance(parsed, str | int | float):
                data[key] = parsed
        model = self.model.model_validate(data)
        return {name: getattr(model, name) for name in self.fields}


class StdioServer:
    """The protocol over one :class:`~engram.harness.mcp_tools.ToolSet`; :meth:`handle`
    answers one message (tests call it directly), :meth:`serve` runs the transport."""

    def __init__(self, factory: Callable[[], AgentMemory], *, name: str = "engram") -> None:
        self.name = name
        self.served: ToolSet = define(factory)
        self._tools = {t.name: t for t in self.served.tools}
        self._resources = {r.uri: r for r in self.served.resources}
        self._arguments: dict[str, _Arguments] = {}
        self._out_lock = threading.Lock()
        self._pending: dict[Any, bool] = {}  # queued calls' ids -> cancelled
        self._pending_lock = threading.Lock()

    # -- the methods -------------------------------------------------------------------

    def _args(self, tool: Tool) -> _Arguments:
        if tool.name not in self._arguments:
            self._arguments[tool.name] = _Arguments(tool)
        return self._arguments[tool.name]

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": {
                "prompts": {"listChanged": False},
                "resources": {"subscribe": False, "listChanged": False},
                "tools": {"listChanged": False},
            },
            "serverInfo": {"name": self.name, "title": TITLE, "version": server_version()},
            "instructions": INSTRUCTIONS,
        }

    def list_tools(self) -> dict[str, Any]:
        return {
            "tools": [
                {
                    "name": t.name,
                    "description": t.description,
                    "inputSchema": self._args(t).schema(),
                    "outputSchema": {
                        "type": "object",
                        "additionalProperties": True,
                        "title": f"{t.name}DictOutput",
                    },
                }
                for t in self.served.tools
            ]
        }

    def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise _Fault(INVALID_PARAMS, "Invalid request parameters", "")
        tool = self._tools.get(name)
        if tool is None:
            return _tool_error(f"Unknown tool: {name}")
        from pydantic import ValidationError
        from pydantic_core import to_json, to_jsonable_python

        try:
            result = tool.fn(**self._args(tool).parse(arguments))
        except ValidationError as e:
            return _tool_error(f"Error executing tool {name}: {e}")
        except ToolFailure as e:
            return _tool_error(f"Error executing tool {name}: {e}")
        except Exception as e:  # a bug: reported as the tool's error, the server lives on
            return _tool_error(f"Error executing tool {name}: {problem_json(e)}")
        return {
            "content": [{"type": "text", "text": to_json(result, fallback=str, indent=2).decode()}],
            "structuredContent": to_jsonable_python(result, fallback=str),
            "isError": False,
        }

    def list_resources(self) -> dict[str, Any]:
        return {
            "resources": [
                {"name": r.name, "uri": r.uri, "description": r.description, "mimeType": r.mime_type}
                for r in self.served.resources
            ]
        }

    def read_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise _Fault(INVALID_PARAMS, "Invalid request parameters", "")
        res = self._resources.get(uri)
        if res is None:
            raise _Fault(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
        try:
            text = res.fn()
        except ToolFailure as e:
            raise _Fault(INTERNAL_ERROR, str(e), {"uri": uri}) from e
        return {"contents": [{"uri": uri, "mimeType": res.mime_type, "text": text}]}

    def handle(self, message: Any) -> dict[str, Any] | None:
        """The answer to one decoded message (``None`` for a notification or a response)."""
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, "Invalid Request: a message is one JSON object (no batches)")
        ident = message.get("id")
        if ident is not None and (isinstance(ident, bool) or not isinstance(ident, str | int)):
            return _error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or ("method" in message and not isinstance(method, str)):
            return _error(ident, INVALID_REQUEST, 'Invalid Request: not a JSON-RPC "2.0" message')
        if method is None:
            if "result" in message or "error" in message:
                return None  # a response: this server sends no requests, so it awaits none
            return _error(ident, INVALID_REQUEST, "Invalid Request: no method")
        params = message.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return None if "id" not in message else _error(ident, INVALID_PARAMS, "params must be an object")
        if "id" not in message:
            self._notify(method, params)
            return None
        try:
            return {"jsonrpc": "2.0", "id": ident, "result": self._dispatch(method, params)}
        except _Fault as f:
            return _error(ident, f.code, f.message, f.data)

    def _dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return self.list_tools()
        if method == "tools/call":
            return self.call_tool(params)
        if method == "resources/list":
            return self.list_resources()
        if method == "resources/read":
            return self.read_resource(params)
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "prompts/list":
            return {"prompts": []}
        raise _Fault(METHOD_NOT_FOUND, "Method not found", method)

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            with self._pending_lock:
                if params.get("requestId") in self._pending:
                    self._pending[params["requestId"]] = True
        # notifications/initialized, roots and progress notices need nothing from this server

    # -- the transport -----------------------------------------------------------------

    def _send(self, out: IO[bytes], answer: dict[str, Any]) -> None:
        line = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        with self._out_lock:
            out.write(line)
            out.flush()

    def _worker(self, jobs: queue.Queue[Any], out: IO[bytes]) -> None:
        while True:
            job = jobs.get()
            if job is _STOP:
                return
            with self._pending_lock:
                cancelled = self._pending.pop(job.get("id"), False)
            if cancelled:
                continue
            answer = self.handle(job)
            if answer is not None:
                self._send(out, answer)

    def serve(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        """Read messages until end of input; answer each; finish the calls already read."""
        jobs: queue.Queue[Any] = queue.Queue()
        worker = threading.Thread(target=self._worker, args=(jobs, stdout), name="engram-mcp-calls")
        worker.start()
        try:
            while True:
                line = stdin.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # skip the rest, unread
                        line = stdin.readline(MAX_LINE)
                    self._send(
                        stdout,
                        _error(None, INVALID_REQUEST, f"Invalid Request: a message over {MAX_LINE} bytes"),
                    )
                    continue
                if not line.strip():
                    continue
                try:
                    message = json.loads(line.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError) as e:
                    self._send(stdout, _error(None, PARSE_ERROR, f"Parse error: {e}"))
                    continue
                if (
                    isinstance(message, dict)
                    and message.get("method") in ("tools/call", "resources/read")
                    and isinstance(message.get("id"), str | int)
                    and not isinstance(message.get("id"), bool)
                ):
                    with self._pending_lock:
                        self._pending[message["id"]] = False
                    jobs.put(message)  # the memory's calls, in order, off the reading thread
                    continue
                answer = self.handle(message)
                if answer is not None:
                    self._send(stdout, answer)
        finally:
            jobs.put(_STOP)
            worker.join()


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _error(ident: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": ident, "error": err}


def serve(factory: Callable[[], AgentMemory], stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Serve the memory ``factory`` opens over ``stdin``/``stdout`` (binary streams)."""
    StdioServer(factory).serve(stdin, stdout)
