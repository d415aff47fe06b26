"""Shared fixtures: backends (SQLite file, PostgreSQL database per test), ledgers, agents.

PostgreSQL: a per-run template database is created and migrated once; each test gets its
own database cloned from it (fast), and everything is dropped at the end of the run. The
server is ENGRAM_TEST_PG_URL or postgresql://postgres@127.0.0.1:5432/postgres. In CI
(CI=true) an unreachable server fails the run; elsewhere the Postgres tests skip with a
message saying how to start it.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.storage.db import make_engine, migrate

PG_ADMIN_URL = os.environ.get("ENGRAM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() == "true"
ORIGIN = "example.com/engram-test"


def _pg_unavailable(reason: str) -> None:
    msg = (
        f"PostgreSQL is not reachable at {PG_ADMIN_URL} ({reason}). Start it with "
        "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
        "or set ENGRAM_TEST_PG_URL."
    )
    if IN_CI:
        pytest.fail("CI requires the PostgreSQL tests: " + msg, pytrace=False)
    pytest.skip(msg)


class PgServer:
    """Creates and drops the databases of one test run."""

    def __init__(self, admin_url: str) -> None:
        import psycopg

        self._psycopg = psycopg
        self.admin_url = admin_url
        self.prefix = f"engram_test_{secrets.token_hex(4)}"
        self.template = f"{self.prefix}_tpl"
        self.created: list[str] = []
        self._n = itertools.count()
        self._exec(f'CREATE DATABASE "{self.template}"')
        self.created.append(self.template)
        engine = make_engine(self.url(self.template))
        migrate(engine)
        engine.dispose()

    def _exec(self, sql: str) -> None:
        with self._psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def url(self, db: str) -> str:
        base = self.admin_url.rsplit("/", 1)[0]
        base = base.replace("postgresql://", "postgresql+psycopg://", 1)
        return f"{base}/{db}"

    def new_database(self) -> str:
        name = f"{self.prefix}_{next(self._n)}"
        self._exec(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self.created.append(name)
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop one database of this run now (its test is over), not at the end of the run."""
        name = url.rsplit("/", 1)[1]
        if name in self.created:
            self._exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.created.remove(name)

    def drop_all(self) -> None:
        # What is left at the end of the run (databases made outside the db_url fixture),
        # said on the terminal: dropping them one by one was a silent tail (issue 26).
        left = list(reversed(self.created))
        if len(left) > 1:
            sys.__stderr__.write(f"\n[engram tests] dropping {len(left)} PostgreSQL test databases\n")
        for name in left:
            self._exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(autouse=True)
def _verifier_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test remembers verified checkpoints in a directory of its own (the SDK, the
    buyer client and subprocesses default to $ENGRAM_VERIFIER_STATE), never in $HOME."""
    path = tmp_path_factory.mktemp("verifier-state")
    monkeypatch.setenv("ENGRAM_VERIFIER_STATE", str(path))
    return path


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as e:
        _pg_unavailable(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    server = PgServer(PG_ADMIN_URL)
    yield server
    server.drop_all()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'engram.db'}"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    url = server.new_database()
    yield url
    server.drop(url)  # after the engine fixture disposed of its pool


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


class StepClock:
    """A deterministic microsecond clock that the test can move, even backwards."""

    def __init__(self, start: int = 1_790_000_000_000_000, step: int = 1000) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def log_key() -> LogKey:
    return LogKey(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


@pytest.fixture
def policy_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


@pytest.fixture
def ledger(
    engine: Engine, log_key: LogKey, clock: StepClock, policy_key: Ed25519PrivateKey, tmp_path: Path
) -> Ledger:
    # With the signer's own record of what it signed (ledger.signed_head), as engram init makes.
    return create_ledger(
        engine, log_key, clock=clock, policy_key=policy_key, signed_head=tmp_path / "log.key.signed-head"
    )


@pytest.fixture
def make_agent(ledger: Ledger, clock: StepClock) -> Callable[[str], Agent]:
    def make(name: str, *, register: bool = True) -> Agent:
        agent = Agent.generate(
            name, log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), clock=clock
        )
        if register:
            agent.register()
        return agent

    return make


# -- the order the tests start in (CI: `pytest -n auto`, pyproject's --dist loadfile) ----------


def _builds_a_shared_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture (one `engram demo` run, one client venv, one
    service, one compiled Go or TypeScript checker) or a session-scoped one of its own module."""
    info = getattr(item, "_fixtureinfo", None)
    module = getattr(getattr(item, "module", None), "__name__", None)
    if info is None or module is None:
        return False
    for defs in info.name2fixturedefs.values():
        fixture = defs[-1]
        if fixture.scope == "module":
            return True
        if fixture.scope == "session" and getattr(fixture.func, "__module__", None) == module:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heavy modules start first: those building a shared fixture, and the interop tests
    (real Claude Code, Codex, Hermes, Go and Node). With --dist loadfile each file runs on one
    worker (its module fixtures built once, not once per worker), and files are handed out in
    this order: the longest ones no longer start last and run alone while the other worker
    waits. The order within a file is kept; what a test checks does not change."""
    heavy = {
        item.nodeid.split("::", 1)[0]
        for item in items
        if item.nodeid.startswith("tests/interop/") or _builds_a_shared_fixture(item)
    }
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in heavy)  # stable
