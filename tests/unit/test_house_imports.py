"""The house's arrows point down only (docs/design.md, "Layout"):

    api -> ledger -> engram.protocol -> verifier        engram.client -> engram.protocol -> verifier

Twins of the verifier's import guard: the client loads no service module and no database or
web-server library; the protocol layer imports only the verifier; the log never imports the
memory subsystem; and no module of Engram takes part in an import cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("verifier", "engram", "ledger", "api")
SERVER_LIBRARIES = {
    "sqlalchemy",
    "alembic",
    "psycopg",
    "psycopg2",
    "fastapi",
    "starlette",
    "uvicorn",
    "typer",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the file (lazy imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for pkg in PACKAGES for p in _sources(pkg)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


def test_importing_the_client_loads_no_service_module_and_no_server_library() -> None:
    code = (
        "import importlib, pkgutil, sys, engram.client, engram.protocol\n"
        "for pkg in (engram.client, engram.protocol):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "engram.client.http" in loaded and "engram.client.litehttp" in loaded  # the walk really ran
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"ledger", "api"}, sorted(m for m in loaded if m.split(".")[0] in {"ledger", "api"})
    assert not tops & SERVER_LIBRARIES, tops & SERVER_LIBRARIES


def test_protocol_imports_only_the_verifier() -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__", "cryptography", "verifier", "engram"}
    for path in _sources("engram/protocol"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in allowed, f"{path.name}: imports {name}"
            if top == "engram":
                assert name.startswith("engram.protocol"), f"{path.name}: imports {name} (above the protocol)"


def test_client_imports_only_protocol_verifier_and_http() -> None:
    allowed = set(sys.stdlib_module_names) | {
        "__future__",
        "cryptography",
        "verifier",
        "engram",
        "httpx",
        "rich",
    }
    for path in _sources("engram/client"):
        for name in _imports(path):
            assert name.split(".")[0] in allowed, f"{path.name}: imports {name}"


def test_harness_layer_imports_the_client_never_the_service() -> None:
    """engram.harness (MCP server, hooks, plugins, import/export) sits on engram.client: the
    embedded log reaches it only as a factory the ``engram`` entry point passes in."""
    allowed = set(sys.stdlib_module_names) | {
        "__future__",
        "cryptography",
        "verifier",
        "engram",
        "mcp",
        "pydantic",
        "pydantic_core",  # pydantic's own core (the stdio MCP server serialises results with it)
        "uvicorn",  # the MCP SDK's own HTTP server, which engram mcp --transport http runs
    }
    for path in _sources("engram/harness"):
        for name in _imports(path):
            assert name.split(".")[0] in allowed, f"{path.name}: imports {name}"


def test_the_log_never_calls_up_into_memory() -> None:
    """The append path, storage, tiles and witnessing run what the composition root hands
    them (gate, validators); they import nothing of ledger.memory."""
    for name in ("log", "storage/store", "storage/db", "storage/schema", "tiles", "witness", "inprocess"):
        path = ROOT / "ledger" / f"{name}.py"
        up = sorted(m for m in _imports(path) if m.startswith("ledger.memory") or m.split(".")[0] == "api")
        assert not up, f"ledger/{name}.py imports {up}"


def test_the_service_never_imports_the_http_layer() -> None:
    for path in _sources("ledger"):
        up = sorted(m for m in _imports(path) if m.split(".")[0] == "api")
        assert not up, f"{path.relative_to(ROOT)} imports {up}"


def test_no_import_cycles() -> None:
    graph = _graph()
    # Tarjan's strongly connected components; any component of two or more modules is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            connect(v)
    # Package __init__ modules re-exporting their own submodules are not cycles of the house.
    real = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert not real, real


def test_old_import_paths_still_work() -> None:
    """README names that moved stay importable from where they were (re-exports)."""
    import engram.client.http as http
    import engram.client.sdk as sdk
    import engram.protocol.errors as errors
    import ledger.client
    import ledger.errors
    import ledger.inprocess
    import ledger.sdk

    assert ledger.client.Buyer is http.Buyer and ledger.client.HttpTransport is http.HttpTransport
    assert ledger.client.RemoteMemory is http.RemoteMemory
    assert ledger.sdk.Agent is sdk.Agent and ledger.sdk.InProcess is ledger.inprocess.InProcess
    assert ledger.errors.ConflictError is errors.ConflictError
    assert set(ledger.errors.__all__) == set(errors.__all__)
