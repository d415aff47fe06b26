"""The house's arrows point down only (docs/design.md, "Layout"):

    engram.cli (the top floor: the shells)
      -> api -> ledger -> engram.protocol -> verifier
      -> engram.harness -> engram.client -> engram.protocol -> verifier

Twins of the verifier's import guard: the client loads no service module and no database or
web-server library; the protocol layer imports only the verifier; the log never imports the
memory subsystem; nothing below the top floor imports it; and no module of Engram takes
part in an import cycle. An import spelled as a string is an import (issue 27, finding 1):
``importlib.import_module("api.settings")``, ``__import__(...)`` and ``"module:attr"``
targets such as uvicorn's ``"api.main:app_factory"`` are read as imports of that module.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


#: A ``"module:attr"`` target naming a module of Engram (uvicorn, entry points, plugins).
_TARGET = re.compile(r"^((?:verifier|engram|ledger|api|migrations)(?:\.\w+)*):\w+(?:\.\w+)*$")
_DYNAMIC = {"import_module", "__import__"}


def _imports_in(source: str) -> set[str]:
    """Every module ``source`` names in an import statement anywhere (lazy imports too), in
    a call of ``import_module``/``__import__`` with a literal name, or in a ``"module:attr"``
    string."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if called in _DYNAMIC and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _TARGET.match(node.value.strip())
            if m:
                names.add(m.group(1))
    return names


def _imports(path: Path) -> set[str]:
    return _imports_in(path.read_text(encoding="utf-8"))


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
    # detect_secrets: the maintained secret detector (bc-detect-secrets) at the core of
    # redaction, which the signer and the log must run alike (engram/protocol/secret_rules.py).
    allowed = set(sys.stdlib_module_names) | {
        "__future__",
        "cryptography",
        "verifier",
        "engram",
        "detect_secrets",
    }
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
            if name.split(".")[0] == "engram" and name != "engram":
                assert _under(name, "engram.client") or _under(name, "engram.protocol"), (
                    f"{path.name}: imports {name} (above the client)"
                )


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
        "agent",  # Hermes Agent's own package: the provider subclasses its MemoryProvider
        "pydantic_core",  # pydantic's own core (the stdio MCP server serialises results with it)
        "uvicorn",  # the MCP SDK's own HTTP server, which engram mcp --transport http runs
    }
    for path in _sources("engram/harness"):
        for name in _imports(path):
            assert name.split(".")[0] in allowed, f"{path.name}: imports {name}"


def test_the_log_never_calls_up_into_memory() -> None:
    """The append path, storage, tiles and witnessing run what the composition root hands
    them (gate, validators); they import nothing of ledger.memory."""
    for name in (
        "log",
        "edge",
        "append",
        "reader",
        "storage/store",
        "storage/db",
        "storage/schema",
        "tiles",
        "witness",
        "inprocess",
    ):
        path = ROOT / "ledger" / f"{name}.py"
        up = sorted(m for m in _imports(path) if m.startswith("ledger.memory") or m.split(".")[0] == "api")
        assert not up, f"ledger/{name}.py imports {up}"


def test_the_service_never_imports_the_http_layer() -> None:
    for path in _sources("ledger"):
        up = sorted(m for m in _imports(path) if m.split(".")[0] == "api")
        assert not up, f"{path.relative_to(ROOT)} imports {up}"


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_nothing_below_the_top_floor_imports_it() -> None:
    """The shells (engram.cli) see both towers; no module of either tower, nor the harness,
    client, protocol or verifier, names engram.cli in any spelling."""
    for pkg in PACKAGES:
        for path in _sources(pkg):
            if _under(_module_name(path), "engram.cli"):
                continue
            up = sorted(m for m in _imports(path) if _under(m, "engram.cli"))
            assert not up, f"{path.relative_to(ROOT)} imports the top floor: {up}"


def test_the_service_and_the_http_layer_import_no_harness() -> None:
    for pkg in ("ledger", "api"):
        for path in _sources(pkg):
            up = sorted(m for m in _imports(path) if _under(m, "engram.harness"))
            assert not up, f"{path.relative_to(ROOT)} imports {up}"


#: The only service modules that name the client: the README's old import paths, kept as
#: re-exports (the brief: a moved public name keeps its old path). The service itself never
#: imports the client (issue 27, finding 2).
SERVICE_ON_CLIENT = {"ledger.client", "ledger.sdk"}


def test_the_service_imports_the_client_nowhere() -> None:
    found = {
        _module_name(path)
        for pkg in ("ledger", "api")
        for path in _sources(pkg)
        if any(_under(m, "engram.client") for m in _imports(path))
    }
    assert found <= SERVICE_ON_CLIENT, sorted(found - SERVICE_ON_CLIENT)


@pytest.mark.parametrize("module", sorted(SERVICE_ON_CLIENT))
def test_the_old_client_paths_only_re_export(module: str) -> None:
    """A compatibility path holds imports and ``__all__`` and nothing else: no code of the
    service can hide in it and lean on the client."""
    path = ROOT / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    for node in body:
        ok = isinstance(node, ast.ImportFrom | ast.Import) or (
            isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
        )
        assert ok, f"{path.relative_to(ROOT)}:{node.lineno} is more than a re-export"


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("import importlib\nimportlib.import_module('api.settings')", "api.settings"),
        ("from importlib import import_module\nimport_module('engram.cli.local')", "engram.cli.local"),
        ("__import__('ledger.local')", "ledger.local"),
        ("uvicorn.run('api.main:app_factory', factory=True)", "api.main"),
        ("X = 'engram.cli.entry:open_embedded'", "engram.cli.entry"),
    ],
)
def test_the_guard_reads_imports_spelled_as_strings(source: str, named: str) -> None:
    """Regression (issue 27, finding 1): ledger/cli.py reached api.settings and
    engram/harness/hermes.py reached ledger.local through import_module, unseen."""
    assert named in _imports_in(source)


def test_the_guard_does_not_read_prose_as_imports() -> None:
    assert _imports_in("X = 'see api.main: the app'\nY = 'ledger'") == set()


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
    import engram.client
    import engram.client.agent_memory as agent_memory
    import engram.client.http as http
    import engram.client.sdk as sdk
    import engram.protocol.errors as errors
    import ledger.client
    import ledger.errors
    import ledger.inprocess
    import ledger.sdk

    assert ledger.client.Buyer is http.Buyer and ledger.client.HttpTransport is http.HttpTransport
    # RemoteMemory is the old name of the one AgentMemory (issue 27, finding 2)
    assert ledger.client.RemoteMemory is engram.client.RemoteMemory is agent_memory.AgentMemory
    assert ledger.sdk.Agent is sdk.Agent and ledger.sdk.InProcess is ledger.inprocess.InProcess
    assert ledger.errors.ConflictError is errors.ConflictError
    assert set(ledger.errors.__all__) == set(errors.__all__)


def test_hermes_is_handed_the_entry_points_opener() -> None:
    """Regression (issue 27, finding 1): the Hermes provider opened the embedded log through
    its own ``import_module("ledger.local")``, without the entry point's translation of a
    missing service into a clear error. It now loads the opener the top floor declares."""
    from engram.cli.entry import open_embedded
    from engram.harness.target import embedded_opener

    assert embedded_opener() is open_embedded


def _reaches_in(source: str, pairs: set[tuple[str, str]], *, any_store: bool = False) -> list[int]:
    """Lines of ``x.ledger.store``-like attribute chains (``pairs``: (owner, attribute)) in
    ``source``; with ``any_store``, of every ``.store`` attribute at all."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        pair = (node.value.attr, node.attr) if isinstance(node.value, ast.Attribute) else None
        if pair in pairs or (any_store and node.attr == "store"):
            found.append(node.lineno)
    return found


def _store_reaches(paths: list[Path], pairs: set[tuple[str, str]], *, any_store: bool = False) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line}"
        for path in paths
        for line in _reaches_in(path.read_text(encoding="utf-8"), pairs, any_store=any_store)
    ]


def test_routes_and_pages_ask_the_services_not_their_store() -> None:
    """The routes and the web UI's pages ask the ledger and the memory service (typed rows
    through query functions), never ``svc.ledger.store`` nor ``svc.memory.projection``
    (issue 27, finding 5: 15 route sites; issue 41: 7 more in the web UI)."""
    paths = [*_sources("api/routes"), ROOT / "api" / "fastpath.py", *_sources("api/ui")]
    reaching = _store_reaches(paths, {("ledger", "store"), ("memory", "projection")})
    assert not reaching, reaching


def test_the_web_ui_reaches_no_store_and_no_storage_module() -> None:
    """The web UI (api/ui) reads through ledger.explore's query functions and the services:
    no ``.store`` attribute in any spelling, no import of the storage adapter or SQLAlchemy."""
    paths = _sources("api/ui")
    assert not _store_reaches(paths, set(), any_store=True)
    for path in paths:
        low = sorted(m for m in _imports(path) if _under(m, "ledger.storage") or _under(m, "sqlalchemy"))
        assert not low, f"{path.relative_to(ROOT)} imports {low}"


def test_the_explorer_is_no_second_sql_room() -> None:
    """ledger.explore builds the UI's pages from the log's read side; its SQL lives in the
    store (ledger.storage.browse), beside every other query: it imports no SQLAlchemy and no
    table of the schema."""
    names = _imports(ROOT / "ledger" / "explore.py")
    low = sorted(m for m in names if _under(m, "sqlalchemy") or _under(m, "ledger.storage.schema"))
    assert not low, low


def test_the_guard_sees_a_store_reach() -> None:
    """The attribute guard can fail: it catches a page reaching the store, in either spelling."""
    assert _reaches_in("x = 1\nrow = svc.ledger.store.leaf(1)", {("ledger", "store")}) == [2]
    assert _reaches_in("ok = self.ledger.store", set(), any_store=True) == [1]
    assert _reaches_in("row = svc.ledger.leaf(1)", {("ledger", "store")}, any_store=True) == []
