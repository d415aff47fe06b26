"""Issue 25, finding 8: two hosts sharing one PostgreSQL database and one log key signed a
fork after a failover to a lagging replica, each guarding only what it had signed itself.

Now the hosts share one signer record (``ENGRAM_SIGNER_RECORD``, on storage both mount) and
write it before each commit (``ENGRAM_SIGNER_RECORD_WRITE=before-commit``). Two hosts, as
separate ``engram`` processes with homes of their own, append to one database; a replica is
copied from it; the primary takes one more commit, which the replica never gets; the second
host fails over to the replica and is refused (``signer.fork``), writing nothing. The same
failover with per-host records (what each host kept before) signs a second checkpoint of a
size the first host already signed, with another root: the fork this refuses."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PgServer
from tests.e2e.processes import ENGRAM

pytestmark = pytest.mark.postgres


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


def _checkpoint(env: dict[str, str]) -> tuple[int, str]:
    out = _run(env, "log", "checkpoint")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return int(lines[1]), lines[2]


def test_two_hosts_fail_over_without_a_fork(tmp_path: Path, pg_server: PgServer) -> None:
    primary = pg_server.new_database()
    shared = tmp_path / "shared"  # what both hosts mount
    shared.mkdir()

    def host(name: str, db: str, **extra: str) -> dict[str, str]:
        env = {**os.environ, "ENGRAM_HOME": str(tmp_path / name), "ENGRAM_DATABASE_URL": db}
        env |= {"ENGRAM_EMBEDDER": "off", "ENGRAM_SIGNER_RECORD": str(shared / "log.signed-head")}
        env |= {"ENGRAM_SIGNER_RECORD_WRITE": "before-commit", **extra}
        return env

    a, b = host("a", primary), host("b", primary)
    done = _run(a, "init", "--origin", "hosts.example/log")
    assert done.returncode == 0, done.stderr
    (tmp_path / "b").mkdir()
    for name in ("log.key", "policy.key"):  # one log key, deployed to both hosts
        shutil.copy2(tmp_path / "a" / name, tmp_path / "b" / name)
    key = str(tmp_path / "carol.key")
    assert _run(a, "agent", "create", "carol", "--key-file", key).returncode == 0
    append = ("event", "append", "--key-file", key, "--kind", "commitment", "--body", '{"promise":"p"}')
    for env in (a, b, a, b):  # both hosts sign on the one database
        r = _run(env, *append)
        assert r.returncode == 0, r.stderr
    assert not (tmp_path / "a" / "log.key.signed-head").exists()  # the shared record, not per host

    # A replica that lags by one commit: copied now, the primary then takes one more.
    replica_name = primary.rsplit("/", 1)[1] + "_replica"
    pg_server._exec(f'CREATE DATABASE "{replica_name}" TEMPLATE "{primary.rsplit("/", 1)[1]}"')
    pg_server.created.append(replica_name)
    replica = pg_server.url(replica_name)
    assert _run(a, *append).returncode == 0
    signed_size, signed_root = _checkpoint(a)

    # Host b fails over to the replica: the record is ahead of it, nothing is signed.
    b_failed_over = host("b", replica)
    before = _checkpoint(b_failed_over)
    assert before[0] == signed_size - 1
    refused = _run(b_failed_over, *append)
    assert refused.returncode != 0
    assert "signer.fork" in refused.stdout + refused.stderr
    assert _checkpoint(b_failed_over) == before
    assert _run(b_failed_over, "memory", "recall", "--agent", "carol", "p").returncode == 0  # reads go on

    # The counterfactual: per-host records written after commit (what each host kept before).
    # Host b's own record holds what it signed, behind the replica: it signs a checkpoint of a
    # size host a already signed, with another root. This is the fork the shared record stops.
    own = host(
        "b",
        replica,
        ENGRAM_SIGNER_RECORD=str(tmp_path / "b" / "own.signed-head"),
        ENGRAM_SIGNER_RECORD_WRITE="after-commit",
    )
    assert _run(own, "log", "reanchor", "--yes").returncode == 0
    body = '{"promise":"another"}'
    forked = _run(own, "event", "append", "--key-file", key, "--kind", "commitment", "--body", body)
    # The log signed and committed it; the client, which remembers the checkpoint of that
    # size it verified before, is the one that notices.
    assert "state.fork" in forked.stdout + forked.stderr
    fork_size, fork_root = _checkpoint(own)
    assert fork_size == signed_size and fork_root != signed_root
