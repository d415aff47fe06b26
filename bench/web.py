"""The HTTP service: durable ingest with 1, 8 and 64 clients, against the floor, then the
public reads.

A real ``engram serve --workers 2`` (uvicorn, bench_http.Server) on loopback, SQLite or
PostgreSQL. The load comes from separate client processes (at most ``load_procs``, so the
client's own Python does not become the bottleneck of one interpreter), on the same two cores
as the server: what a client costs is part of what is measured, and the figures say so.

* Ingest: each client is a thread with its own agent (registered with the operator token),
  appending one event at a time through the shipped client (``engram.client``): the event
  is signed, the request posted, the receipt's checkpoint signature and inclusion proof
  verified before the next. events/s over the wall time from the first to the last append;
  p50/p99 of each append's latency.
* Against the floor (issue 28): the floor server of :mod:`bench.floor` (the least a signed
  durable log does, same stack, same backend) and Engram's record route get the same kind
  of pre-signed events from one load generator, 64 in flight, in alternating rounds; Engram's
  rate and p50/p99 are reported beside the floor's (targets: ratios of this run).
* Reads: ``GET /checkpoint``, a hash tile (``/tile/0/000``) and an entry bundle
  (``/tile/entries/000``; partial ``.p/W`` while the log holds fewer than 256 entries), each
  from ``load_procs`` processes with one keep-alive connection (http.client) for
  ``reads_seconds``; requests/s, only 200s counted.
* The server's peak RSS: master and workers summed, sampled every 0.2 s.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.bench_http import TOKEN, Server
from bench.common import database, fig, median, pct, plain_pg, run_procs
from bench.floor import FloorServer, load, presign
from bench.plan import Config
from bench.report import Figure
from verifier.note import VerifierKey

_TILE_WIDTH = 256


class _RssSampler:
    """The peak of (server process + its descendants) RSS, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        continue
                self.peak = max(self.peak, total / (1 << 20))
            except psutil.Error:
                return
            self._stop.wait(0.2)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def _client_proc(
    url: str, vkey: str, names: Sequence[str], n: int, hook: bool, ready: Any, go: Any, results: Any
) -> None:
    """One load process: its agents register (with ``hook``, each also opens a session), then
    (on ``go``) each makes ``n`` timed steps, all at once. A step is one signed commitment,
    or with ``hook`` what a Claude Code prompt hook does: log the user's turn, then recall for
    it within the hook's budget (the transport names the turn it wrote, ``Engram-Min-Index``,
    so the recall sees it)."""
    from engram.client import AgentMemory
    from engram.client.http import HttpTransport
    from engram.client.sdk import Agent
    from engram.harness.hooks import RECALL_BUDGET_TOKENS

    def step_of(agent: Agent, transport: HttpTransport) -> Callable[[int], object]:
        if not hook:
            return lambda i: agent.append("commitment", {"promise": f"promise {i}: " + "h" * 220})
        mem = AgentMemory(agent, transport)
        sid = mem.open_session(title="hook bench")

        def round_trip(i: int) -> object:
            prompt = f"step {i}: make the retry loop use idempotency keys for the payment queue"
            mem.turn(sid, "user", prompt)
            return mem.recall(prompt, session=sid, budget_tokens=RECALL_BUDGET_TOKENS)

        return round_trip

    try:
        steps = []
        for name in names:
            transport = HttpTransport(url, operator_token=TOKEN)
            agent = Agent.generate(name, log_vkey=vkey, transport=transport, state_dir=None)
            agent.register()
            steps.append(step_of(agent, transport))
        lat: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        spans: list[tuple[float, float]] = []

        def work(step: Callable[[int], object]) -> None:
            mine = []
            try:
                start = time.monotonic()
                for i in range(n):
                    t = time.perf_counter()
                    step(i)
                    mine.append(time.perf_counter() - t)
                end = time.monotonic()
            except Exception as e:
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                return
            with lock:
                lat.extend(mine)
                spans.append((start, end))

        threads = [threading.Thread(target=work, args=(step,)) for step in steps]
        ready.put(len(steps))
        go.wait()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results.put({"lat": lat, "spans": spans, "errors": errors})
    except Exception as e:
        ready.put(0)
        results.put({"lat": [], "spans": [], "errors": [f"{type(e).__name__}: {e}"]})


def _clients(
    server: Server, names: Sequence[str], n: int, procs: int, hook: bool
) -> tuple[float, float, float]:
    """(steps/s, p50 ms, p99 ms) of one client per name, each making ``n`` steps, from up to
    ``procs`` processes (see :func:`_client_proc`)."""
    nprocs = max(1, min(procs, len(names)))
    got = run_procs(
        _client_proc, [(server.url, server.vkey, names[i::nprocs], n, hook) for i in range(nprocs)]
    )
    errors = [e for g in got for e in g["errors"]]
    if errors:
        raise RuntimeError(f"{len(errors)} HTTP clients failed, first: {errors[0]}")
    lat = [x for g in got for x in g["lat"]]
    spans = [sp for g in got for sp in g["spans"]]
    wall = max(e for _, e in spans) - min(b for b, _ in spans)
    return len(lat) / wall, median(lat) * 1000, pct(lat, 0.99) * 1000


def http_ingest(
    server: Server, clients: int, per_client: int, procs: int, tag: str
) -> tuple[float, float, float]:
    """(events/s, p50 ms, p99 ms) of ``clients`` concurrent HTTP clients."""
    return _clients(
        server, [f"http-{tag}-{clients}-{i}" for i in range(clients)], per_client, procs, hook=False
    )


def hook_round_trips(
    server: Server, agents: int, turns: int, procs: int, tag: str
) -> tuple[float, float, float]:
    """(round trips/s, p50 ms, p99 ms) of ``agents`` agents each logging a turn and recalling
    for it, all at once (issue 28: a hook's wait before the prompt reaches the model)."""
    return _clients(server, [f"hook-{tag}-{i}" for i in range(agents)], turns, procs, hook=True)


def _read_proc(url: str, path: str, seconds: float, ready: Any, go: Any, results: Any) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
    try:
        conn.request("GET", path)
        first = conn.getresponse()
        first.read()
        ready.put(first.status)
        go.wait()
        ok = bad = 0
        t0 = time.monotonic()
        deadline = t0 + seconds
        while time.monotonic() < deadline:
            conn.request("GET", path)
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                ok += 1
            else:
                bad += 1
        results.put((ok, bad, time.monotonic() - t0))
    except Exception:
        ready.put(0)
        results.put((0, 1, 1.0))
    finally:
        conn.close()


def http_reads(url: str, path: str, procs: int, seconds: float) -> float:
    """Requests/s of ``path`` from ``procs`` processes, each one keep-alive connection."""
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(target=_read_proc, args=(url, path, seconds, ready, go, results)) for _ in range(procs)
    ]
    for w in workers:
        w.start()
    statuses = [ready.get(timeout=120) for _ in workers]
    if any(s != 200 for s in statuses):
        go.set()
        for w in workers:
            w.join()
        raise RuntimeError(f"GET {path} answered {statuses}")
    go.set()
    got = [results.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join()
    if any(bad for _, bad, _ in got):
        raise RuntimeError(f"GET {path}: {sum(b for _, b, _ in got)} answers were not 200")
    return sum(ok / elapsed for ok, _, elapsed in got)


def _tile_paths(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
    try:
        conn.request("GET", "/checkpoint")
        size = int(conn.getresponse().read().decode().splitlines()[1])
    finally:
        conn.close()
    suffix = "" if size >= _TILE_WIDTH else f".p/{size}"
    return f"/tile/0/000{suffix}", f"/tile/entries/000{suffix}"


def _register(url: str, registrations: Sequence[dict[str, str]]) -> None:
    """Register pre-signed agents with the operator token, 200 to a batch."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=120)
    try:
        for i in range(0, len(registrations), 200):
            body = json.dumps({"events": list(registrations[i : i + 200])}).encode()
            conn.request(
                "POST",
                "/v1/events",
                body=body,
                headers={"content-type": "application/json", "authorization": f"Bearer {TOKEN}"},
            )
            r = conn.getresponse()
            data = r.read()
            if r.status != 201:
                raise RuntimeError(f"registering the load's agents: {r.status} {data[:200]!r}")
    finally:
        conn.close()


def against_floor(cfg: Config, out: list[Figure], backend: str, server: Server) -> None:
    """Engram and the floor (bench.floor) under one load generator, interleaved: the same
    pre-signed events (fresh ones each round), 64 requests in flight, on the same backend;
    each under both HTTP parsers (issue 43, Deliver 3): the floor with uvicorn's httptools and
    h11, Engram with ``ENGRAM_HTTP_PARSER`` httptools (``server``, the default) and h11 (a second
    ``engram serve`` over its own database)."""
    s = cfg.sizes
    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    rounds = 1 if s.http_events < 512 else 2
    n = max(64, s.http_events)
    inflight = min(64, n)
    origin = VerifierKey.parse(server.vkey).name
    legs = ("floor", "floor.h11", "raw", "raw.h11")
    sets = [{leg: presign(origin, n, f"{backend}-{leg}-{r}") for leg in legs} for r in range(rounds)]
    keys = {k: v for one in sets for leg in ("floor", "floor.h11") for k, v in one[leg].keys.items()}
    runs: dict[str, list[Any]] = {leg: [] for leg in legs}
    commits = [0, 0]  # the raw leg's batches (checkpoints) and events (leaves)
    work = Path(cfg.workdir)
    with (
        database(backend, cfg.pg_url, cfg.workdir, "floor") as furl,
        database(backend, cfg.pg_url, cfg.workdir, "floor-h11") as furl11,
        database(backend, cfg.pg_url, cfg.workdir, "http-h11") as eurl11,
    ):
        db = (lambda u: u) if backend == "sqlite" else plain_pg
        floors = {
            "floor": FloorServer(db(furl), keys, work / f"floor-{backend}", parser="httptools"),
            "floor.h11": FloorServer(db(furl11), keys, work / f"floor-h11-{backend}", parser="h11"),
        }
        engram_h11 = Server(
            work / f"http-h11-{backend}",
            None if backend == "sqlite" else plain_pg(eurl11),
            s.http_workers,
            env={"ENGRAM_HTTP_PARSER": "h11"},
        )
        engrams = {"raw": server, "raw.h11": engram_h11}
        try:
            for leg, eng in engrams.items():
                warm = presign(origin, 8, f"{backend}-{leg}-warm")
                _register(eng.url, warm.registrations)
                load(
                    eng.url,
                    [(f"/v1/agents/{a}/records", b) for a, b in zip(warm.agents, warm.records, strict=True)],
                )
            for one in sets:
                for leg in legs:  # interleaved: each round runs every leg once, in turn
                    events = one[leg]
                    if leg in floors:
                        jobs = [("/append", b) for b in events.records]
                        url = floors[leg].url
                    else:
                        url = engrams[leg].url
                        _register(url, events.registrations)
                        jobs = [
                            (f"/v1/agents/{a}/records", b)
                            for a, b in zip(events.agents, events.records, strict=True)
                        ]
                    before = _log_counts(engrams[leg]) if leg == "raw" else None
                    runs[leg].append(load(url, jobs, inflight=inflight, procs=s.load_procs))
                    if before is not None:
                        after = _log_counts(engrams[leg])
                        commits[0] += after[1] - before[1]
                        commits[1] += after[0] - before[0]
        finally:
            for f in floors.values():
                f.stop()
            engram_h11.stop()
    note = f"{n} pre-signed events x {rounds} round(s), {inflight} in flight, {s.load_procs} load processes"
    labels = {
        "floor": f"the floor (bench.floor), {s.http_workers} workers, httptools, {name}",
        "floor.h11": f"the floor (bench.floor), {s.http_workers} workers, h11, {name}",
        "raw": f"Engram, the floor's load (record route), {s.http_workers} workers, httptools, {name}",
        "raw.h11": f"Engram, the floor's load (record route), {s.http_workers} workers, h11, {name}",
    }
    for leg, label in labels.items():
        key = {
            "floor": f"floor.http.{backend}",
            "floor.h11": f"floor.http.{backend}.h11",
            "raw": f"ingest.http.{backend}.raw",
            "raw.h11": f"ingest.http.{backend}.raw.h11",
        }[leg]
        out.append(fig(f"{key}.rate", label, median([r.rate for r in runs[leg]]), "events/s", note=note))
        out.append(fig(f"{key}.p50", f"{label}, p50", median([r.p50_ms for r in runs[leg]]), "ms", note=note))
        out.append(fig(f"{key}.p99", f"{label}, p99", median([r.p99_ms for r in runs[leg]]), "ms", note=note))

    def ratio(a: str, b: str) -> float:
        return float(median([r.rate for r in runs[a]]) / median([r.rate for r in runs[b]]))

    out.append(
        fig(
            f"ingest.http.{backend}.raw.events_per_commit",
            f"Engram, the floor's load: events per commit (leaves / checkpoints the leg added), {name}",
            commits[1] / max(1, commits[0]),
            "events",
            note=note,
        )
    )

    for who, fast, slow in (("floor", "floor", "floor.h11"), ("Engram", "raw", "raw.h11")):
        prefix = f"floor.http.{backend}" if who == "floor" else f"ingest.http.{backend}.raw"
        out.append(
            fig(
                f"{prefix}.parser_ratio",
                f"{who}: httptools' rate / h11's, {name}",
                ratio(fast, slow),
                "x",
                note=note,
            )
        )
        p99 = median([r.p99_ms for r in runs[fast]]) / median([r.p99_ms for r in runs[slow]])
        out.append(
            fig(f"{prefix}.parser_p99_ratio", f"{who}: httptools' p99 / h11's, {name}", p99, "x", note=note)
        )
    for parser, eng, flo in (("httptools", "raw", "floor"), ("h11", "raw.h11", "floor.h11")):
        key = f"ingest.http.{backend}.raw" + ("" if parser == "httptools" else ".h11")
        out.append(
            fig(
                f"{key}.vs_floor",
                f"Engram / the floor, both {parser}, rate, {name}",
                ratio(eng, flo),
                "x",
                note=note,
            )
        )
        p99 = median([r.p99_ms for r in runs[eng]]) / median([r.p99_ms for r in runs[flo]])
        out.append(
            fig(f"{key}.p99_vs_floor", f"Engram / the floor, both {parser}, p99, {name}", p99, "x", note=note)
        )


def _log_counts(server: Server) -> tuple[int, int]:
    """(leaves, checkpoints) in ``server``'s log: one checkpoint per committed batch."""
    from ledger.config import Settings
    from ledger.storage.db import make_engine
    from ledger.storage.store import SqlStore

    engine = make_engine(
        Settings.from_env({k: v for k, v in server.env.items() if k.startswith("ENGRAM_")}).database_url
    )
    try:
        c = SqlStore(engine).counts()
    finally:
        engine.dispose()
    return c["leaves"], c["checkpoints"]


def run(cfg: Config, out: list[Figure], backend: str) -> None:
    s = cfg.sizes
    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    with database(backend, cfg.pg_url, cfg.workdir, "http") as url:
        home = Path(cfg.workdir) / f"http-{backend}"
        server = Server(home, None if backend == "sqlite" else plain_pg(url), s.http_workers)
        sampler = _RssSampler(server.proc.pid)
        try:
            http_ingest(server, 2, 3, 1, "warmup")  # both workers' imports, connections, caches
            against_floor(cfg, out, backend, server)
            for clients in s.clients:
                per_client = max(2, s.http_events // clients)
                rate, p50, p99 = http_ingest(server, clients, per_client, s.load_procs, backend)
                key = f"ingest.http.{backend}.c{clients}"
                what = f"HTTP ingest, {clients} client{'s' if clients > 1 else ''}, {s.http_workers} workers, {name}"
                n = f"{clients * per_client} events, {min(s.load_procs, clients)} client processes"
                out.append(fig(f"{key}.rate", what, rate, "events/s", note=n))
                out.append(fig(f"{key}.p50", f"{what}, p50", p50, "ms", note=n))
                out.append(fig(f"{key}.p99", f"{what}, p99", p99, "ms", note=n))
            agents = max(s.clients)
            rate, p50, p99 = hook_round_trips(
                server, agents, max(2, s.http_events // agents), s.load_procs, backend
            )
            what = f"Hook round trip (a turn, then recall for it), {agents} agents at once, {s.http_workers} workers, {name}"
            n = f"{agents} agents x {max(2, s.http_events // agents)} round trips, {s.load_procs} client processes"
            out.append(fig(f"hook.http.{backend}.rate", what, rate, "round trips/s", note=n))
            out.append(fig(f"hook.http.{backend}.p50", f"{what}, p50", p50, "ms", note=n))
            out.append(fig(f"hook.http.{backend}.p99", f"{what}, p99", p99, "ms", note=n))
            tile, entries = _tile_paths(server.url)
            for path_key, path in (("checkpoint", "/checkpoint"), ("tile", tile), ("entries", entries)):
                rate = http_reads(server.url, path, s.load_procs, s.reads_seconds)
                out.append(
                    fig(
                        f"reads.{backend}.{path_key}",
                        f"GET {path}, {s.http_workers} workers, {name}",
                        rate,
                        "requests/s",
                        note=f"{s.load_procs} client processes, keep-alive, {s.reads_seconds:g} s",
                    )
                )
        finally:
            server.stop()
            peak = sampler.stop()
        out.append(
            fig(
                f"http.{backend}.server_rss",
                f"engram serve peak RSS (master + {s.http_workers} workers), {name}",
                peak,
                "MiB",
            )
        )
