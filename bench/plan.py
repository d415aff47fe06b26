"""What one run measures: the sizes per mode, the sections, the figures each section must
produce, and the targets of issue 14 as ratios of those figures.

Pure (standard library only): the unit tests build plans and targets without measuring.
Every figure key a section returns is listed here (:func:`expected_keys`), so ``--smoke``
can fail when one is missing; the section modules produce exactly these keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.report import Target

__all__ = [
    "BACKENDS",
    "MODES",
    "SECTIONS",
    "Config",
    "Section",
    "Sizes",
    "expected_keys",
    "planned_targets",
    "select_sections",
    "size_tag",
    "sizes_for",
    "targets",
]

BACKENDS = ("sqlite", "postgresql")
MODES = ("smoke", "default", "long")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    """Every size parameter of a run (``--smoke``: tiny, same code paths)."""

    verify_n: int  # signatures per sign/verify rate
    hash_n: int  # node hashes for the SHA-256 rate
    insert_rows: int  # rows for the batched insert rate
    insert_batch: int
    clients: tuple[int, ...]  # concurrent clients, in process and over HTTP
    ingest_events: int  # events per in-process ingest run, shared by its clients (at least 2 each)
    http_events: int  # the same over HTTP
    http_workers: int  # engram serve --workers
    load_procs: int  # client processes driving the HTTP service
    reads_seconds: float  # per read path (checkpoint, tile, entries)
    proof_sizes: tuple[int, ...]  # SQLite log sizes for proofs (and pymerkle's)
    pg_proof_sizes: tuple[int, ...]  # PostgreSQL log sizes for proofs
    proofs_k: int  # proofs per measurement
    build_agents: int  # agents a large log is built with (one event each per batch)
    bundle_sizes: tuple[int, ...]  # pact entries per bundle
    bundle_seconds: float  # verify each bundle again until this much time passed
    replay_sizes: tuple[int, ...]
    rebuild_events: int  # memory writes in the log the projection is rebuilt from
    recall_memories: int
    recall_queries: int
    peer_appends: int  # single durable appends per peer
    provara_sdk_appends: int  # provara's NDJSON vault rescans its file per append (quadratic)
    victim_events: int  # sequential appends whose latency is measured beside abuse (bench.abuse)
    burst_threads: int  # threads of the agent bursting signed recalls


_SIZES = {
    "smoke": Sizes(
        verify_n=500,
        hash_n=20_000,
        insert_rows=2_000,
        insert_batch=500,
        clients=(1, 8, 64),
        ingest_events=128,
        http_events=128,
        http_workers=2,
        load_procs=4,
        reads_seconds=0.5,
        proof_sizes=(500, 1_000, 2_000),
        pg_proof_sizes=(500, 1_000, 2_000),
        proofs_k=50,
        build_agents=100,
        bundle_sizes=(1, 10, 50),
        bundle_seconds=0.05,
        replay_sizes=(300, 1_000),
        rebuild_events=300,
        recall_memories=200,
        recall_queries=20,
        peer_appends=30,
        provara_sdk_appends=20,
        victim_events=10,
        burst_threads=8,
    ),
    "default": Sizes(
        verify_n=20_000,
        hash_n=1_000_000,
        insert_rows=50_000,
        insert_batch=1_000,
        clients=(1, 8, 64),
        ingest_events=2_048,
        http_events=1_024,
        http_workers=2,
        load_procs=4,
        reads_seconds=5.0,
        proof_sizes=(10**4, 10**5, 10**6),
        pg_proof_sizes=(10**4, 10**5, 10**6),
        proofs_k=2_000,
        build_agents=2_000,
        bundle_sizes=(1, 100, 1_000),
        bundle_seconds=2.0,
        replay_sizes=(10**4, 10**5),
        rebuild_events=20_000,
        recall_memories=10_000,
        recall_queries=200,
        peer_appends=1_000,
        provara_sdk_appends=300,
        victim_events=100,
        burst_threads=48,
    ),
}
_SIZES["long"] = dataclasses.replace(
    _SIZES["default"],
    ingest_events=8_192,
    http_events=4_096,
    reads_seconds=10.0,
    pg_proof_sizes=(10**4, 10**5, 10**6, 10**7),
    replay_sizes=(10**5, 10**6),
    rebuild_events=100_000,
    recall_memories=100_000,
)


def sizes_for(mode: str, **overrides: object) -> Sizes:
    """The sizes of ``mode`` with ``overrides`` (from the command line) applied."""
    if mode not in _SIZES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return dataclasses.replace(_SIZES[mode], **{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """What a section's child process is handed (picklable)."""

    mode: str
    sizes: Sizes
    pg_url: str | None  # the PostgreSQL server's admin URL, or None: SQLite only
    workdir: str  # a directory the run owns (deleted at the end)


def size_tag(n: int) -> str:
    """``10000`` -> ``1e4`` (powers of ten), else the number: the size part of a figure key."""
    k = 0
    m = n
    while m >= 10 and m % 10 == 0:
        m //= 10
        k += 1
    return f"1e{k}" if m == 1 and k > 0 else str(n)


# -- figures each section produces ------------------------------------------------------


def _limits(cfg: Config) -> list[str]:
    keys = [
        "limits.verify.cryptography",
        "limits.verify.pynacl",
        "limits.sign.cryptography",
        "limits.sha256.node",
        "limits.insert.sqlite",
    ]
    return keys + (["limits.insert.postgresql"] if cfg.pg_url else [])


def _ingest(backend: str) -> Callable[[Config], list[str]]:
    def keys(cfg: Config) -> list[str]:
        return [
            *(
                f"ingest.inproc.{backend}.c{c}.{m}"
                for c in cfg.sizes.clients
                for m in ("rate", "p50", "p99", "per_commit")
            ),
            *(f"ingest.inproc.{backend}.raw.{m}" for m in ("rate", "p50", "p99", "per_commit")),
        ]

    return keys


def _http(backend: str) -> Callable[[Config], list[str]]:
    def keys(cfg: Config) -> list[str]:
        out = [f"ingest.http.{backend}.c{c}.{m}" for c in cfg.sizes.clients for m in ("rate", "p50", "p99")]
        out += [f"reads.{backend}.{p}" for p in ("checkpoint", "tile", "entries")]
        out += [
            f"{k}.{m}"
            for k in (
                f"floor.http.{backend}",
                f"floor.http.{backend}.h11",
                f"ingest.http.{backend}.raw",
                f"ingest.http.{backend}.raw.h11",
                f"hook.http.{backend}",
            )
            for m in ("rate", "p50", "p99")
        ]
        # the parsers side by side (issue 43, Deliver 3): each server's httptools/h11 ratios,
        # and Engram to the floor under each parser
        out += [
            f"{k}.{m}"
            for k in (f"floor.http.{backend}", f"ingest.http.{backend}.raw")
            for m in ("parser_ratio", "parser_p99_ratio")
        ]
        out += [
            f"ingest.http.{backend}.raw{p}.{m}" for p in ("", ".h11") for m in ("vs_floor", "p99_vs_floor")
        ]
        # how many events one commit holds under that load (issue 43, Deliver 1: one sequencer per host)
        out.append(f"ingest.http.{backend}.raw.events_per_commit")
        return [*out, f"http.{backend}.server_rss"]

    return keys


def _proof_sizes(cfg: Config, backend: str) -> tuple[int, ...]:
    return cfg.sizes.proof_sizes if backend == "sqlite" else cfg.sizes.pg_proof_sizes


def _proofs(backend: str) -> Callable[[Config], list[str]]:
    def keys(cfg: Config) -> list[str]:
        out = [f"proofs.{backend}.build"]
        for n in _proof_sizes(cfg, backend):
            out += [f"proofs.{backend}.{size_tag(n)}.{m}" for m in ("cold", "warm", "many", "rss")]
        return out

    return keys


def _pymerkle(cfg: Config) -> list[str]:
    out = ["peer.pymerkle.append", "peer.pymerkle.bulk"]
    for n in cfg.sizes.proof_sizes:
        out += [f"peer.pymerkle.{size_tag(n)}.{m}" for m in ("cold", "warm", "rss")]
    return out


def _eventsourcing(cfg: Config) -> list[str]:
    return [
        "peer.eventsourcing.c1.rate",
        "peer.eventsourcing.c1.p50",
        "peer.eventsourcing.c8.rate",
    ]


def _provara(cfg: Config) -> list[str]:
    return [
        "peer.provara.sqlite.append",
        "peer.provara.sqlite_full.append",
        "peer.provara.sqlite.verify",
        "peer.provara.sdk.append",
        "peer.provara.sdk.verify",
    ]


def _bundles(cfg: Config) -> list[str]:
    out = []
    for m in cfg.sizes.bundle_sizes:
        out += [f"bundle.{m}.{k}" for k in ("verify", "ms", "entries", "create_ms")]
    return [*out, "bundle.cli_ms"]


def _replay(cfg: Config) -> list[str]:
    out = []
    for n in cfg.sizes.replay_sizes:
        out += [f"replay.{size_tag(n)}.{k}" for k in ("verify", "per_core", "export", "audit", "rss")]
    return out


def _abuse(backend: str) -> Callable[[Config], list[str]]:
    def keys(cfg: Config) -> list[str]:
        k = f"abuse.{backend}"
        return [
            f"{k}.alone.p50",
            f"{k}.alone.p95",
            f"{k}.flood.p95",
            f"{k}.flood.refused",
            *(f"{k}.burst.{t}.{m}" for t in ("fair", "unfair") for m in ("p95", "rate")),
        ]

    return keys


def _rebuild(cfg: Config) -> list[str]:
    return ["rebuild.events", "rebuild.inprocess", "rebuild.cli"]


def _recall(cfg: Config) -> list[str]:
    return ["recall.items", "recall.p50", "recall.p99"]


@dataclass(frozen=True, slots=True)
class Section:
    """One child process: ``func`` (``module:function``) called with the config and ``args``."""

    name: str
    group: str
    func: str
    args: tuple[str, ...]
    needs_pg: bool
    keys: Callable[[Config], list[str]]


SECTIONS: tuple[Section, ...] = (
    Section("limits", "limits", "bench.limits:run", (), False, _limits),
    *(
        Section(f"ingest-{b}", "ingest", "bench.ingest:run", (b,), b == "postgresql", _ingest(b))
        for b in BACKENDS
    ),
    *(Section(f"http-{b}", "http", "bench.web:run", (b,), b == "postgresql", _http(b)) for b in BACKENDS),
    *(
        Section(f"proofs-{b}", "proofs", "bench.proofs:run", (b,), b == "postgresql", _proofs(b))
        for b in BACKENDS
    ),
    *(
        Section(f"abuse-{b}", "abuse", "bench.abuse:run", (b,), b == "postgresql", _abuse(b))
        for b in BACKENDS
    ),
    Section("bundles", "bundles", "bench.audit:bundles", (), False, _bundles),
    Section("replay", "replay", "bench.audit:replay", (), False, _replay),
    Section("rebuild", "rebuild", "bench.projection:rebuild", (), False, _rebuild),
    Section("recall", "recall", "bench.projection:recall", (), False, _recall),
    Section("peer-pymerkle", "peers", "bench.peers:pymerkle", (), False, _pymerkle),
    Section("peer-eventsourcing", "peers", "bench.peers:eventsourcing", (), False, _eventsourcing),
    Section("peer-provara", "peers", "bench.peers:provara", (), False, _provara),
)
GROUPS = tuple(dict.fromkeys(s.group for s in SECTIONS))


def select_sections(only: Sequence[str] | None, *, pg: bool) -> list[Section]:
    """The sections to run: those of the ``--only`` groups (or section names), PostgreSQL's
    only with a server. ``limits`` always runs: most targets are ratios to its figures."""
    if only:
        unknown = [o for o in only if o not in GROUPS and o not in {s.name for s in SECTIONS}]
        if unknown:
            raise ValueError(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    chosen = [
        s
        for s in SECTIONS
        if (not only or s.group in only or s.name in only or s.group == "limits") and (pg or not s.needs_pg)
    ]
    return chosen


def expected_keys(cfg: Config, sections: Sequence[Section]) -> list[str]:
    return [k for s in sections for k in s.keys(cfg)]


def _p99_100ms(figure: str, label: str, text: str) -> Target:
    """An absolute latency target: the p99 figure (ms) at most 100 ms."""
    return Target(
        key=figure, label=label, figure=figure, reference=None, scale=100.0, op="<=", bound=1.0, text=text
    )


def planned_targets(
    all_targets: Sequence[Target], expected: Sequence[str]
) -> tuple[list[Target], list[Target]]:
    """(targets whose figures this run plans to measure, the others: sections not run)."""
    keys = set(expected)
    planned = [t for t in all_targets if t.figure in keys and (t.reference is None or t.reference in keys)]
    return planned, [t for t in all_targets if t not in planned]


# -- targets (issue 14) ---------------------------------------------------------------------

VERIFY = "limits.verify.cryptography"
#: Memory is "bounded" when RSS at the largest size is at most this multiple of RSS at the
#: smallest, while the log grew 10-100x.
RSS_GROWTH_BOUND = 1.5


def targets(cfg: Config) -> list[Target]:
    """The targets of issue 14 (and a few comparisons with the peers, without a bound)."""
    s = cfg.sizes
    out = [
        Target(
            key="ingest.inproc.sqlite.c64",
            label="in-process ingest, 64 clients, SQLite",
            figure="ingest.inproc.sqlite.c64.rate",
            reference=VERIFY,
            bound=0.3,
            text=">= 0.3x one core's cryptography verify rate (issue 43)",
        ),
        Target(
            key="ingest.inproc.postgresql.c64",
            label="in-process ingest, 64 clients, PostgreSQL",
            figure="ingest.inproc.postgresql.c64.rate",
            reference=VERIFY,
            bound=0.3,
            text=">= 0.3x one core's cryptography verify rate",
        ),
    ]
    for b in BACKENDS:
        # The SDK's clients (signing, appending, verifying every receipt) beside the same
        # number of clients appending pre-signed events, in the same run (issue 43).
        out.append(
            Target(
                key=f"ingest.inproc.{b}.sdk_vs_raw",
                label=f"in-process ingest, 64 clients, {b}: the SDK vs pre-signed events",
                figure=f"ingest.inproc.{b}.c64.rate",
                reference=f"ingest.inproc.{b}.raw.rate",
                bound=None,
            )
        )
        out.append(
            Target(
                key=f"ingest.http.{b}.sdk_vs_raw",
                label=f"HTTP ingest, 64 clients, {s.http_workers} workers, {b}: the SDK vs the pre-signed load",
                figure=f"ingest.http.{b}.c64.rate",
                reference=f"ingest.http.{b}.raw.rate",
                bound=0.5,
                text=">= 0.5x the pre-signed load's rate in the same run (issue 43)",
            )
        )
        out.append(
            Target(
                key=f"ingest.inproc.{b}.c1.p50",
                label=f"in-process ingest, 1 client, p50, {b}",
                figure=f"ingest.inproc.{b}.c1.p50",
                reference=None,
                scale=5.0,
                op="<=",
                bound=1.0,
                text="p50 <= 5 ms",
            )
        )
    out += [
        Target(
            key="ingest.http.sqlite.c64",
            label=f"HTTP ingest, 64 clients, {s.http_workers} workers, SQLite",
            figure="ingest.http.sqlite.c64.rate",
            reference=VERIFY,
            bound=0.2,
            text=">= 0.2x one core's cryptography verify rate",
        ),
        _p99_100ms("ingest.http.sqlite.c64.p99", "HTTP ingest, 64 clients, p99, SQLite", "p99 <= 100 ms"),
        *(
            Target(
                key=f"ingest.http.{b}.vs_floor",
                label=f"HTTP ingest, the floor's load, {s.http_workers} workers, {b}: Engram vs the floor",
                figure=f"ingest.http.{b}.raw.rate",
                reference=f"floor.http.{b}.rate",
                bound=0.5,
                text=">= 0.5x the floor's rate (issue 28)",
            )
            for b in BACKENDS
        ),
        _p99_100ms(
            "ingest.http.sqlite.raw.p99",
            "HTTP ingest, the floor's load, p99, SQLite",
            "p99 <= 100 ms (issue 28)",
        ),
        _p99_100ms(
            "hook.http.sqlite.p99",
            "Hook round trip (a turn, then recall for it), 64 agents at once, p99, SQLite",
            "p99 <= 100 ms (issue 28)",
        ),
        Target(
            key="ingest.http.postgresql.raw",
            label="HTTP ingest, the floor's load, PostgreSQL vs SQLite",
            figure="ingest.http.postgresql.raw.rate",
            reference="ingest.http.sqlite.raw.rate",
            bound=0.7,
            text=">= 0.7x the SQLite figure (issue 28)",
        ),
        Target(
            key="ingest.http.postgresql.c64",
            label="HTTP ingest, 64 clients, PostgreSQL vs SQLite",
            figure="ingest.http.postgresql.c64.rate",
            reference="ingest.http.sqlite.c64.rate",
            bound=0.7,
            text=">= 0.7x the SQLite figure",
        ),
    ]
    largest = size_tag(max(s.proof_sizes))
    out.append(
        Target(
            key="proofs.vs_pymerkle",
            label=f"inclusion proofs at {largest} entries vs pymerkle (SQLite, warm)",
            figure=f"proofs.sqlite.{largest}.warm",
            reference=f"peer.pymerkle.{largest}.warm",
            bound=10.0,
            text=">= 10x pymerkle's SQLite backend at the same size",
        )
    )
    for b in BACKENDS:
        for path in ("checkpoint", "tile"):
            out.append(
                Target(
                    key=f"reads.{b}.{path}",
                    label=f"GET /{'checkpoint' if path == 'checkpoint' else 'tile/0/000'}, "
                    f"{s.http_workers} workers, {b}",
                    figure=f"reads.{b}.{path}",
                    reference=None,
                    scale=3000.0,
                    bound=1.0,
                    text=">= 3,000 requests/s",
                )
            )
    largest_replay = size_tag(max(s.replay_sizes))
    out.append(
        Target(
            key="replay.verify",
            label=f"replay (engram-verify log) of {largest_replay} entries, per core used",
            figure=f"replay.{largest_replay}.per_core",  # its rate over the cores it used (CPU s / wall s)
            reference=VERIFY,
            bound=0.8,
            text=">= 0.8x the verify rate per core used",
        )
    )
    for m in s.bundle_sizes:
        out.append(
            Target(
                key=f"bundle.{m}.verify",
                label=f"bundle verification, {m} claimed entries, 1 core",
                figure=f"bundle.{m}.verify",
                reference=VERIFY,
                bound=0.8,
                text=">= 0.8x the verify rate per core used",
            )
        )
    out.append(
        Target(
            key="rebuild.inprocess",
            label="projection rebuild",
            figure="rebuild.inprocess",
            reference=None,
            scale=25_000.0,
            bound=1.0,
            text=">= 25,000 events/s",
        )
    )
    for b in BACKENDS:
        sizes = s.proof_sizes if b == "sqlite" else s.pg_proof_sizes
        lo, hi = size_tag(min(sizes)), size_tag(max(sizes))
        out.append(
            Target(
                key=f"proofs.{b}.rss",
                label=f"memory of the proving process, {b}, {hi} vs {lo} entries",
                figure=f"proofs.{b}.{hi}.rss",
                reference=f"proofs.{b}.{lo}.rss",
                op="<=",
                bound=RSS_GROWTH_BOUND,
                text=f"bounded at every size (<= {RSS_GROWTH_BOUND:g}x while the log grows {max(sizes) // min(sizes)}x)",
            )
        )
    lo, hi = size_tag(min(s.replay_sizes)), size_tag(max(s.replay_sizes))
    out.append(
        Target(
            key="replay.rss",
            label=f"memory of engram-verify log, {hi} vs {lo} entries",
            figure=f"replay.{hi}.rss",
            reference=f"replay.{lo}.rss",
            op="<=",
            bound=RSS_GROWTH_BOUND,
            text=f"bounded at every size (<= {RSS_GROWTH_BOUND:g}x while the log grows "
            f"{max(s.replay_sizes) // min(s.replay_sizes)}x)",
        )
    )
    # Comparisons with the peers and between libraries: ratios only, no target.
    out += [
        Target(
            key="cmp.pynacl",
            label="Ed25519 verify: PyNaCl vs cryptography",
            figure="limits.verify.pynacl",
            reference=VERIFY,
            bound=None,
        ),
        Target(
            key="cmp.proofs.cold",
            label=f"inclusion proofs at {largest}, fresh process, vs pymerkle fresh tree",
            figure=f"proofs.sqlite.{largest}.cold",
            reference=f"peer.pymerkle.{largest}.cold",
            bound=None,
        ),
        Target(
            key="cmp.eventsourcing",
            label="durable appends, 1 client: Engram (SQLite, signed + proven) vs eventsourcing recorder",
            figure="ingest.inproc.sqlite.c1.rate",
            reference="peer.eventsourcing.c1.rate",
            bound=None,
        ),
        Target(
            key="cmp.provara.append",
            label="appends, 1 client: Engram (SQLite) vs provara SQLite vault (synchronous=FULL)",
            figure="ingest.inproc.sqlite.c1.rate",
            reference="peer.provara.sqlite_full.append",
            bound=None,
        ),
        Target(
            key="cmp.provara.verify",
            label="verification: Engram replay vs provara verify_chain",
            figure=f"replay.{largest_replay}.verify",
            reference="peer.provara.sqlite.verify",
            bound=None,
        ),
    ]
    return out
