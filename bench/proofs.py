"""Inclusion proofs at growing log sizes (10^4, 10^5, 10^6 entries by default).

The log is grown with pre-signed events (bench.logbuild) to each size in turn; at each size a
fresh ``Ledger`` is opened on the same database, as a new server process would be (its cache
of committed Merkle nodes, ledger.storage.store.ProofCache, starts empty), and proves the
inclusion of random leaves in the tree of that size with ``Ledger.prove_inclusion`` (which
also verifies each proof before returning it):

* ``cold``: the first ``proofs_k`` proofs of that fresh process;
* ``warm``: the next ``proofs_k`` (other random leaves): the steady state of a server;
* ``many``: ``Ledger.prove_inclusion_many`` in batches of 100 (what bundles use), proofs/s;
* ``rss``: this process's resident memory after proving at that size (the builder, the
  ledger and its bounded caches): it must not grow with the log.
"""

from __future__ import annotations

import random
import time

from bench.bench_log import new_ledger
from bench.common import database, fig, rss_mib
from bench.logbuild import LogBuilder
from bench.plan import Config, size_tag
from bench.report import Figure
from ledger.compose import memory_rules
from ledger.log import Ledger
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore


def _fresh(ledger: Ledger, url: str) -> Ledger:
    """The same log opened anew: a new engine and an empty proof cache."""
    return Ledger(
        SqlStore(make_engine(url)), ledger.log_key, policy_key=ledger.policy_key, rules=memory_rules()
    )


def _prove(ledger: Ledger, indices: list[int], size: int) -> float:
    t0 = time.perf_counter()
    for i in indices:
        ledger.prove_inclusion(i, size)
    return len(indices) / (time.perf_counter() - t0)


def _prove_many(ledger: Ledger, indices: list[int], size: int, batch: int = 100) -> float:
    t0 = time.perf_counter()
    for start in range(0, len(indices), batch):
        ledger.prove_inclusion_many(indices[start : start + batch], size)
    return len(indices) / (time.perf_counter() - t0)


def run(cfg: Config, out: list[Figure], backend: str) -> None:
    s = cfg.sizes
    sizes = s.proof_sizes if backend == "sqlite" else s.pg_proof_sizes
    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    rng = random.Random(14)
    with database(backend, cfg.pg_url, cfg.workdir, "proofs") as url:
        ledger = new_ledger(url)
        try:
            with LogBuilder(ledger, agents=s.build_agents) as builder:
                for n in sorted(sizes):
                    builder.grow_to(n)
                    fresh = _fresh(ledger, url)
                    try:
                        k = s.proofs_k
                        cold = _prove(fresh, [rng.randrange(n) for _ in range(k)], n)
                        warm = _prove(fresh, [rng.randrange(n) for _ in range(k)], n)
                        many = _prove_many(fresh, [rng.randrange(n) for _ in range(k)], n)
                    finally:
                        fresh.store.engine.dispose()
                    tag = size_tag(n)
                    at = f"at {n:,} entries, {name}"
                    note = f"{k} random leaves"
                    out.append(
                        fig(
                            f"proofs.{backend}.{tag}.cold",
                            f"inclusion proofs {at}, fresh process",
                            cold,
                            "proofs/s",
                            note=note,
                        )
                    )
                    out.append(
                        fig(
                            f"proofs.{backend}.{tag}.warm",
                            f"inclusion proofs {at}, warm",
                            warm,
                            "proofs/s",
                            note=note,
                        )
                    )
                    out.append(
                        fig(
                            f"proofs.{backend}.{tag}.many",
                            f"inclusion proofs {at}, prove_inclusion_many x100",
                            many,
                            "proofs/s",
                            note=note,
                        )
                    )
                    out.append(
                        fig(
                            f"proofs.{backend}.{tag}.rss",
                            f"RSS of the proving process {at}",
                            rss_mib(),
                            "MiB",
                        )
                    )
                out.append(
                    fig(
                        f"proofs.{backend}.build",
                        f"building the log with append_batch ({s.build_agents // 2} events/batch), {name}",
                        builder.rate,
                        "entries/s",
                        note="pre-signed events, signing overlapped in a second process",
                    )
                )
        finally:
            ledger.store.engine.dispose()
