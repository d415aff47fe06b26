"""``engram-verify``: the offline verifier's command line (standard library + cryptography).

    engram-verify checkpoint FILE --log-key KEY [--trusted-checkpoint FILE]... [--consistency-proof FILE]...
    engram-verify bundle FILE --log-key KEY [--trusted-checkpoint FILE]... [--audience A] [--at T]
    engram-verify token TOKEN --agent-key B64 --origin O --agent A --audience X --kind K [--at T]
    engram-verify log DIR --log-key KEY [--trusted-checkpoint FILE]... [--quiet]

Every command also takes ``--json``, ``--state-dir DIR`` (remembered state: the newest
checkpoint verified per log; see verifier/state.py).

Every run prints its checks as a numbered list and ends with VERIFIED or FAILED naming the
first failed check. Exit codes: 0 verified, 1 failed, 2 usage error (bad arguments, an
unreadable key). Nothing is fetched from the network; only the named files are read.

``log DIR`` audits a static tlog-tiles export (``engram export tiles DIR``) from scratch:

1. ``checkpoint``: DIR/checkpoint is signed by the log key.
2. ``entries``: every entry bundle up to the checkpoint's size is complete and well formed.
3. ``leaves``: every leaf is canonical, its index is its position, server timestamps
   strictly increase.
4. ``signatures``: every agent signature verifies under the key valid for that agent at
   that index, as registered, rotated and revoked in the log itself.
5. ``streams``: every (agent, kind) stream's version/prev chain is unbroken.
6. ``tiles``: every hash tile equals the tree recomputed from the entries.
7. ``root``: the recomputed root is the checkpoint's.
8. ``history``: every earlier checkpoint the log signed (DIR/engram/checkpoints.jsonl,
   streamed line by line) is signed by the log key and is a prefix of this log.

Anchors the auditor holds (``--trusted-checkpoint``, the remembered state) are checked
before the replay (none may be newer than the export: a rollback) and during it (the
replayed root at each anchor's size must be the anchor's: else the log forked or rewrote
its history, whatever the export's own checkpoint history says).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from verifier.errors import LimitExceededError, MalformedError, ProofError, VerificationError
from verifier.event import Leaf
from verifier.jcs import parse_strict
from verifier.note import MAX_NOTE_BYTES, VerifiedCheckpoint, VerifierKey, b64decode_strict, verify_checkpoint
from verifier.parallel import MIN_PARALLEL_ENTRIES, SignatureChecker, default_jobs
from verifier.replay import LogReplay
from verifier.state import CheckpointStore, StateError, require_extends
from verifier.tiles import TILE_HEIGHT, TILE_WIDTH, read_bundle, read_file, tile_path, tiles_for_size
from verifier.witness import MAX_POLICY_BYTES, WitnessError, WitnessKey, WitnessPolicy

__all__ = ["main", "run"]

HISTORY = "engram/checkpoints.jsonl"
#: One history line: a JSON object holding a note of at most MAX_NOTE_BYTES (escaped).
MAX_HISTORY_LINE = 2 * MAX_NOTE_BYTES + 256
MAX_BUNDLE_FILE = 64 * 1024 * 1024
MAX_PROOF_FILE = 1 << 20


class UsageError(Exception):
    """Bad arguments or an unusable trust anchor: exit code 2."""


@dataclass(slots=True)
class Report:
    checks: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, Any] | None = None

    def ok(self, name: str, detail: str) -> None:
        self.checks.append({"n": len(self.checks) + 1, "check": name, "ok": True, "detail": detail})

    def fail(self, name: str, error: VerificationError) -> None:
        entry = {
            "n": len(self.checks) + 1,
            "check": name,
            "ok": False,
            "detail": str(error),
            "failed_check": error.check,
        }
        self.checks.append(entry)
        self.failed = entry


def _progress(done: int, total: int, quiet: bool) -> None:
    if quiet or total == 0 or not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} entries")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _load_key(vkey: str) -> VerifierKey:
    try:
        return VerifierKey.parse(vkey.strip())
    except VerificationError as e:
        raise UsageError(f"--log-key is not a valid Ed25519 verifier key: {e}") from e


def _step_of(error: VerificationError) -> str:
    check = error.check
    if check.startswith(("key.", "event.")):
        return "signatures"
    if check.startswith("stream."):
        return "streams"
    return "leaves"


def read_input(path: str | Path, max_bytes: int, what: str) -> bytes:
    """Read at most ``max_bytes`` + 1 bytes: a larger file is refused without being read."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e}") from e
    if len(data) > max_bytes:
        raise LimitExceededError(f"{what} {path} is larger than {max_bytes} bytes", check="input.size")
    return data


@dataclass(frozen=True, slots=True)
class _Anchor:
    checkpoint: VerifiedCheckpoint
    prefix: str  # "trusted" (given on the command line) or "state" (remembered)


def _anchors(paths: Sequence[str], key: VerifierKey) -> list[_Anchor]:
    out = []
    for path in paths:
        data = read_input(path, MAX_NOTE_BYTES, "trusted checkpoint")
        try:
            out.append(_Anchor(verify_checkpoint(data, key), "trusted"))
        except VerificationError as e:
            raise UsageError(
                f"--trusted-checkpoint {path} is not a checkpoint signed by the log key: {e}"
            ) from e
    return out


def _history(root: Path, key: VerifierKey, size: int) -> Iterator[VerifiedCheckpoint]:
    """Earlier checkpoints of the export, streamed: one bounded line at a time, strictly
    parsed, each signed by the log key, sizes increasing and within ``size``."""
    path = root / HISTORY
    if not path.exists():
        return  # older exports carry no history
    last = -1
    with open(path, "rb") as f:
        for n, line in enumerate(iter(lambda: f.readline(MAX_HISTORY_LINE + 1), b""), start=1):
            if len(line) > MAX_HISTORY_LINE or not line.endswith(b"\n"):
                raise LimitExceededError(
                    f"{HISTORY} line {n} is longer than {MAX_HISTORY_LINE} bytes or unterminated",
                    check="history.format",
                )
            obj = parse_strict(line[:-1], max_bytes=MAX_HISTORY_LINE)
            if not isinstance(obj, dict) or set(obj) != {"size", "note"} or not isinstance(obj["note"], str):
                raise MalformedError(f"{HISTORY} line {n} is not {{size, note}}", check="history.format")
            c = verify_checkpoint(obj["note"].encode("utf-8"), key)
            if c.size != obj["size"] or c.size <= last or c.size > size:
                raise MalformedError(
                    f"{HISTORY} line {n}: sizes must match their notes, increase, and stay within {size}",
                    check="history.format",
                )
            last = c.size
            yield c


class _Prefixes:
    """Roots the replay must reproduce at given sizes: the export's own history (streamed)
    and the auditor's anchors. Checked as the replay passes each size, in O(1) memory."""

    def __init__(self, history: Iterator[VerifiedCheckpoint], anchors: list[_Anchor]) -> None:
        self._history = history
        self._next: VerifiedCheckpoint | None = None
        self._anchors = sorted(anchors, key=lambda a: a.checkpoint.size)
        self.history_checked = 0
        self.failure: tuple[str, VerificationError] | None = None
        self._advance_history()

    def _advance_history(self) -> None:
        try:
            self._next = next(self._history, None)
        except VerificationError as e:
            self._next = None
            self.failure = self.failure or ("history", e)

    def at(self, size: int, root: Callable[[], bytes]) -> None:
        while self._anchors and self._anchors[0].checkpoint.size == size:
            anchor = self._anchors.pop(0)
            if root() != anchor.checkpoint.root:
                self.failure = self.failure or (
                    "trusted",
                    StateError(
                        f"FORK: the replayed log's root at size {size} is not the root of the checkpoint "
                        f"you {'remembered' if anchor.prefix == 'state' else 'trusted'}: the log rewrote "
                        "its history or forked",
                        check=f"{anchor.prefix}.fork",
                    ),
                )
        while self._next is not None and self._next.size == size:
            if root() != self._next.root:
                self.failure = self.failure or (
                    "history",
                    ProofError(
                        f"checkpoint at size {size} is inconsistent with the replayed log",
                        check="replay.consistency",
                    ),
                )
            self.history_checked += 1
            self._advance_history()


def audit_log(
    root: Path,
    key: VerifierKey,
    *,
    quiet: bool = False,
    anchors: Sequence[_Anchor] = (),
    jobs: int = 1,
) -> Report:
    """Run checks 1-8 over a tiles directory; stop at the first failure. ``jobs`` > 1
    verifies signatures in that many worker processes ahead of the replay (the result is
    the same; verifier.parallel)."""
    return _audit_log(root, key, quiet=quiet, anchors=anchors, jobs=jobs)[0]


class _Replay:
    """Checks 2-5 over the tiles directory: each tile bundle read and parsed, its signatures
    verified ahead (in worker processes when ``jobs`` > 1), then replayed in order, the
    history's prefixes and the hash tiles checked as the tree grows. ``step`` names the check
    the first failure belongs to."""

    def __init__(
        self,
        root: Path,
        cp: VerifiedCheckpoint,
        replay: LogReplay,
        prefixes: _Prefixes,
        anchor_sizes: set[int],
        *,
        jobs: int,
        quiet: bool,
    ) -> None:
        self.root, self.cp, self.replay, self.prefixes = root, cp, replay, prefixes
        self.anchor_sizes, self.jobs, self.quiet = anchor_sizes, jobs, quiet
        self.step = "entries"
        self.tiles = _TileCheck(root)
        replay.on_nodes = self.tiles.add
        self.checker = SignatureChecker(jobs if cp.size >= MIN_PARALLEL_ENTRIES else 1)
        # Bundles parsed and sent to the signature workers ahead of the sequential replay (at
        # most 2 per worker: bounded memory), each with the error that stopped its reading.
        self.ahead: deque[tuple[list[Leaf], tuple[str, VerificationError] | None, Any]] = deque()
        prefixes.at(0, self.root_now)

    def root_now(self) -> bytes:
        # Roots at the anchors' sizes are kept (replay.roots) for the remembered state.
        replay = self.replay
        return replay.remember_root() if replay.size in self.anchor_sizes else replay.tree.root()

    def entries(self) -> None:
        """Every tile bundle read ahead, then replayed in order."""
        for n in range(-(-self.cp.size // TILE_WIDTH)):
            leaves, stop = self._read(n, min(TILE_WIDTH, self.cp.size - n * TILE_WIDTH))
            self.ahead.append((leaves, stop, self.checker.submit(leaves)))
            if stop is not None:
                break
            while len(self.ahead) > 2 * max(1, self.jobs):
                self._replay_one()
        while self.ahead:
            self._replay_one()

    def _read(self, n: int, width: int) -> tuple[list[Leaf], tuple[str, VerificationError] | None]:
        """Tile bundle ``n``'s leaves, parsed, and the error that stopped its reading."""
        try:
            raws = read_bundle(self.root, n, width)
        except VerificationError as e:
            return [], ("entries", e)
        leaves: list[Leaf] = []
        for raw in raws:
            try:
                leaves.append(self.replay.parse(raw))
            except VerificationError as e:
                return leaves, (_step_of(e), e)
        return leaves, None

    def _replay_one(self) -> None:
        leaves, stop, keys = self.ahead.popleft()
        verified = keys.result() if isinstance(keys, Future) else keys
        for leaf, key in zip(leaves, verified, strict=True):
            self.step = "leaves"
            try:
                self.replay.add_parsed(leaf, verified_with=key)
            except VerificationError as e:
                self.step = _step_of(e)
                raise
            self.prefixes.at(self.replay.size, self.root_now)
            if self.prefixes.failure is not None:
                self.step, err = self.prefixes.failure
                raise err
        if stop is not None:
            self.step = stop[0]
            raise stop[1]
        _progress(self.replay.size, self.cp.size, self.quiet)


def _audit_log(
    root: Path,
    key: VerifierKey,
    *,
    quiet: bool = False,
    anchors: Sequence[_Anchor] = (),
    jobs: int = 1,
) -> tuple[Report, LogReplay | None, VerifiedCheckpoint | None]:
    """:func:`audit_log`, also returning the replay and checkpoint (for the remembered state)."""
    report = Report()
    try:
        cp = verify_checkpoint(read_file(root, "checkpoint", max_bytes=MAX_NOTE_BYTES), key)
    except VerificationError as e:
        report.fail("checkpoint", e)
        return report, None, None
    report.ok("checkpoint", f"signed by {key.name}+{key.key_id.hex()}: size {cp.size}")
    try:
        for anchor in anchors:
            if anchor.checkpoint.size > cp.size:
                require_extends(anchor.checkpoint, cp, None, prefix=anchor.prefix)
    except VerificationError as e:
        report.fail("trusted", e)
        return report, None, cp

    replay = LogReplay(cp.origin)
    prefixes = _Prefixes(_history(root, key, cp.size), list(anchors))
    run = _Replay(root, cp, replay, prefixes, {a.checkpoint.size for a in anchors}, jobs=jobs, quiet=quiet)
    try:
        run.entries()
    except VerificationError as e:
        report.fail(run.step, e)
        return report, None, cp
    finally:
        run.checker.close()
    tiles = run.tiles
    agents = {a for a, _ in replay.heads}
    report.ok("entries", f"{cp.size} entries in {-(-cp.size // TILE_WIDTH)} bundles")
    report.ok("leaves", "canonical, indices dense, server timestamps strictly increasing")
    keys = replay.keys.keys.values()
    report.ok(
        "signatures",
        f"every signature valid under the key of its agent at its index "
        f"({len(keys)} keys, {sum(1 for k in keys if k.retired_how == 'rotated')} rotated, "
        f"{sum(1 for k in keys if k.retired_how == 'revoked')} revoked)",
    )
    report.ok(
        "streams", f"{len(replay.heads)} streams of {len(agents)} agents, every version/prev chain intact"
    )

    try:
        checked = tiles.finish(cp.size)
    except VerificationError as e:
        report.fail("tiles", e)
        return report, None, cp
    report.ok("tiles", f"{checked} hash tiles equal the tree recomputed from the entries")

    try:
        replay.check_checkpoint(cp)
    except VerificationError as e:
        report.fail("root", e)
        return report, None, cp
    report.ok("root", f"recomputed root {cp.root.hex()[:16]}... is the checkpoint's")

    if prefixes.failure is not None:  # e.g. a malformed history of an empty log
        report.fail(*prefixes.failure)
        return report, None, cp
    report.ok(
        "history",
        f"{prefixes.history_checked} earlier checkpoints are prefixes of this log (no fork, no rewrite)",
    )
    if anchors:
        report.ok(
            "trusted",
            "the replayed log extends the checkpoint(s) you hold at size "
            + ", ".join(str(a.checkpoint.size) for a in anchors),
        )
    report.summary = {
        "origin": cp.origin,
        "size": cp.size,
        "root": cp.root.hex(),
        "agents": len(agents),
        "streams": len(replay.heads),
        "keys": len(replay.keys.keys),
        "checkpoints": prefixes.history_checked,
    }
    return report, replay, cp


class _TileCheck:
    """Compares each hash tile with the replayed tree as soon as the tree completes it, so
    the audit holds at most one unfinished tile per level (bounded memory), not every leaf
    hash of the log. A difference is kept and reported after the entries' checks."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.open: dict[int, list[bytes]] = {}  # tile level -> hashes of its unfinished tile
        self.full = 0
        self.failure: VerificationError | None = None

    def add(self, completed: list[tuple[int, int, bytes]]) -> None:
        for level, idx, h in completed:
            if level % TILE_HEIGHT:
                continue
            hashes = self.open.setdefault(level // TILE_HEIGHT, [])
            hashes.append(h)
            if len(hashes) == TILE_WIDTH:
                self._compare(level // TILE_HEIGHT, idx // TILE_WIDTH, TILE_WIDTH, hashes)
                hashes.clear()
                self.full += 1

    def finish(self, size: int) -> int:
        """Check the partial tiles of ``size``; raise the first difference; return how many
        tiles were compared."""
        expected = list(tiles_for_size(size))
        for level, n, width in expected:
            if width < TILE_WIDTH:
                self._compare(level, n, width, self.open.get(level, [])[:width])
        if self.failure is not None:
            raise self.failure
        if self.full != sum(1 for _, _, w in expected if w == TILE_WIDTH):  # pragma: no cover
            raise ProofError("the replayed tree and the tile layout disagree", check="tiles.hash")
        return len(expected)

    def _compare(self, level: int, n: int, width: int, hashes: Sequence[bytes]) -> None:
        if self.failure is not None:
            return
        rel = tile_path(level, n, width)
        try:
            got = read_file(self.root, rel, max_bytes=32 * TILE_WIDTH)
        except VerificationError as e:
            self.failure = e
            return
        expected = b"".join(hashes)
        if got != expected:
            where = next(
                (
                    i
                    for i in range(0, min(len(got), len(expected)), 32)
                    if got[i : i + 32] != expected[i : i + 32]
                ),
                None,
            )
            self.failure = ProofError(
                f"{rel} differs from the recomputed tree (first at hash {where if where is None else where // 32})",
                check="tiles.hash",
            )


def _print(report: Report, title: str, as_json: bool) -> int:
    verified = report.failed is None
    if as_json:
        print(
            json.dumps({"verified": verified, "checks": report.checks, "summary": report.summary}, indent=2)
        )
    else:
        print(title)
        for c in report.checks:
            mark = "ok  " if c["ok"] else "FAIL"
            print(f"  {c['n']}. [{mark}] {c['check']}: {c['detail']}")
        if verified:
            print("VERIFIED")
        else:
            assert report.failed is not None
            print(
                f"FAILED at check {report.failed['n']} ({report.failed['check']}: {report.failed['failed_check']})"
            )
    return 0 if verified else 1


@contextmanager
def _state(args: argparse.Namespace, key: VerifierKey) -> Iterator[Any]:
    """The remembered state of this log, locked for the whole verification (or None).

    Opt-in for the command line (``--state-dir``): an offline verification with state needs
    the input to carry a consistency proof from the remembered size, which a bundle has only
    when it was built for it (``--trusted-size``), so it is never switched on silently."""
    directory = args.state_dir
    if directory is None:
        yield None
        return
    with CheckpointStore(directory).locked(key) as update:
        yield update


def _witness_policy(args: argparse.Namespace) -> WitnessPolicy | None:
    """The witness policy of ``--witness-policy FILE`` or ``--witness VKEY... --witness-quorum K``."""
    policy_file = getattr(args, "witness_policy", None)
    keys = getattr(args, "witness", None) or []
    quorum = getattr(args, "witness_quorum", None)
    if policy_file and keys:
        raise UsageError("give either --witness-policy or --witness keys, not both")
    if quorum is not None and not keys:
        raise UsageError("--witness-quorum needs --witness keys")
    try:
        if policy_file:
            return WitnessPolicy.parse(read_input(policy_file, MAX_POLICY_BYTES, "witness policy"))
        if keys:
            parsed = [WitnessKey.parse(k) for k in keys]
            k = len(parsed) if quorum is None else quorum
            if not 1 <= k <= len(parsed):
                raise UsageError(f"--witness-quorum must be between 1 and {len(parsed)}")
            return WitnessPolicy.threshold(parsed, k)
    except WitnessError as e:
        raise UsageError(f"witness policy: {e}") from e
    return None


def _witness_step(
    report: Report, policy: WitnessPolicy | None, cp: VerifiedCheckpoint, now: int | None
) -> None:
    if policy is None:
        return
    cosigned = policy.check(cp, now=now)
    report.ok(
        "witnesses",
        "no cosignature required (quorum none)"
        if policy.quorum is None
        else f"cosigned by {', '.join(cosigned)}: the policy's quorum is met",
    )


def _consistency_files(paths: Sequence[str]) -> dict[tuple[int, int], list[bytes]]:
    """Consistency proofs as printed by `engram log prove-consistency` (JSON): only
    ``old_size``, ``new_size`` and ``proof`` are read; roots come from checkpoints."""
    out: dict[tuple[int, int], list[bytes]] = {}
    for path in paths:
        doc = parse_strict(read_input(path, MAX_PROOF_FILE, "consistency proof"), max_bytes=MAX_PROOF_FILE)
        if not isinstance(doc, dict):
            raise MalformedError(f"{path} is not a JSON object", check="consistency.format")
        old, new, proof = doc.get("old_size"), doc.get("new_size"), doc.get("proof")
        if type(old) is not int or type(new) is not int or not isinstance(proof, list) or len(proof) > 64:
            raise MalformedError(f"{path} lacks old_size, new_size or proof", check="consistency.format")
        if not all(isinstance(h, str) for h in proof):
            raise MalformedError(f"{path}: proof hashes are base64 strings", check="consistency.format")
        out[(old, new)] = [b64decode_strict(h, check="consistency.format") for h in proof]
    return out


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    key = _load_key(args.log_key)
    anchors = _anchors(args.trusted_checkpoint, key)
    policy = _witness_policy(args)
    report = Report()
    step = "checkpoint"
    with _state(args, key) as state:
        try:
            data = read_input(args.file, MAX_NOTE_BYTES, "checkpoint")
            proofs = _consistency_files(args.consistency_proof)
            cp = verify_checkpoint(data, key)
            report.ok("checkpoint", f"origin {cp.origin}, size {cp.size}, root {cp.root.hex()}")
            step = "witnesses"
            _witness_step(report, policy, cp, None)
            step = "trusted"
            for anchor in anchors:
                require_extends(
                    anchor.checkpoint, cp, proofs.get((anchor.checkpoint.size, cp.size)), prefix="trusted"
                )
            if anchors:
                report.ok("trusted", f"extends {len(anchors)} trusted checkpoint(s)")
            if state is not None:
                step = "state"
                before = state.remembered
                state.advance(cp, lambda old, new: proofs.get((old, new)))
                report.ok(
                    "state",
                    "first checkpoint remembered for this log"
                    if before is None
                    else f"consistent with the checkpoint of size {before.size} verified before",
                )
            report.summary = {"origin": cp.origin, "size": cp.size, "root": cp.root.hex()}
        except VerificationError as e:
            report.fail(step, e)
    return _print(report, f"checkpoint {args.file}", args.json)


def _bundle_step(check: str) -> str:
    head = check.split(".")[0]
    steps = {
        "format": "format",
        "canonical": "format",
        "json": "format",
        "limit": "format",
        "checkpoint": "checkpoint",
        "note": "checkpoint",
        "origin": "checkpoint",
        "trusted": "trusted",
        "consistency": "trusted",
        "inclusion": "inclusion",
        "leaf": "inclusion",
        "envelope": "inclusion",
        "heads": "heads",
        "key": "signatures",
        "event": "signatures",
        "completeness": "completeness",
        "token": "token",
        "body": "bodies",
        "claim": "claim",
        "witness": "witnesses",
    }
    return steps.get(head, head)


def _cmd_bundle(args: argparse.Namespace) -> int:
    from verifier.bundle import MAX_BUNDLE_BYTES, verify_bundle

    key = _load_key(args.log_key)
    anchors = _anchors(args.trusted_checkpoint, key)
    policy = _witness_policy(args)
    report = Report()
    steps: list[tuple[str, str]] = []
    with _state(args, key) as state:
        try:
            data = read_input(args.file, MAX_BUNDLE_BYTES, "bundle")
            remembered = None if state is None or state.remembered is None else state.remembered.note
            verified = verify_bundle(
                data,
                key,
                trusted_checkpoints=[a.checkpoint.note for a in anchors],
                remembered=remembered,
                witnesses=None if policy is None else lambda cp: policy.check(cp, now=args.at),
                steps=steps,
                audience=args.audience,
                now=args.at,
            )
            if state is not None:
                state.advance(verified.checkpoint, lambda old, _new: verified.consistency.get(old))
        except VerificationError as e:
            for check, detail in steps:
                report.ok(check, detail)
            report.fail(_bundle_step(e.check), e)
            return _print(report, f"bundle {args.file}", args.json)
    for check, detail in steps:
        report.ok(check, detail)
    if state is not None:
        report.ok("state", f"remembered checkpoint of size {verified.checkpoint.size} for {key.name}")
    report.summary = {
        "origin": verified.checkpoint.origin,
        "size": verified.checkpoint.size,
        "entries": verified.entries,
        "erased": verified.erased,
        "covered": sorted(verified.covered),
        "witnesses": list(verified.witnesses),
        "claims": [
            {"statement": c.statement, "recomputed": c.recomputed, "holds": c.holds} for c in verified.claims
        ],
    }
    return _print(report, f"bundle {args.file}", args.json)


def _cmd_token(args: argparse.Namespace) -> int:
    import base64
    import binascii

    from verifier.token import verify_token

    try:
        key = base64.b64decode(args.agent_key, validate=True)
    except binascii.Error as e:
        raise UsageError("--agent-key is not base64") from e
    report = Report()
    try:
        v = verify_token(
            args.token,
            agent_keys=[key],
            origin=args.origin,
            agent=args.agent,
            audience=args.audience,
            kinds=args.kind,
            now=args.at if args.at is not None else int(time.time()),
        )
        report.ok(
            "token",
            f"allows {', '.join(v.kinds)} to {v.audience}; revocation id {v.revocation_ids[0][:16]}...",
        )
    except VerificationError as e:
        report.fail("token", e)
    return _print(report, "share token", args.json)


def _cmd_log(args: argparse.Namespace) -> int:
    key = _load_key(args.log_key)
    root = Path(args.dir)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory")
    if args.jobs is not None and not 1 <= args.jobs <= 256:
        raise UsageError("--jobs is between 1 and 256")
    anchors = _anchors(args.trusted_checkpoint, key)
    policy = _witness_policy(args)
    with _state(args, key) as state:
        if state is not None and state.remembered is not None:
            anchors.append(_Anchor(state.remembered, "state"))
        report, replay, cp = _audit_log(
            root, key, quiet=args.quiet or args.json, anchors=anchors, jobs=args.jobs or default_jobs()
        )
        if report.failed is None and cp is not None and replay is not None:
            try:
                _witness_step(report, policy, cp, None)
            except VerificationError as e:
                report.fail("witnesses", e)
                return _print(report, f"log {root}", args.json)
            try:
                if state is not None:
                    state.advance_replayed(cp, replay.roots.get)
                    report.ok("state", f"remembered checkpoint of size {cp.size} for {key.name}")
            except VerificationError as e:
                report.fail("state", e)
    return _print(report, f"log {root}", args.json)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"engram-verify: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _common(p: argparse.ArgumentParser, *, trusted: bool = True) -> None:
    p.add_argument("--log-key", required=True, help="the log's verifier key (engram log key)")
    if trusted:
        p.add_argument(
            "--trusted-checkpoint",
            action="append",
            default=[],
            metavar="FILE",
            help="a checkpoint you already hold: what is verified must extend it (repeatable)",
        )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="remember the newest verified checkpoint per log here and require every later one to "
        "extend it (the SDK and buyer client default to $ENGRAM_VERIFIER_STATE or "
        "~/.local/state/engram/verifier)",
    )
    p.add_argument(
        "--witness-policy",
        metavar="FILE",
        help="a c2sp.org/tlog-policy file: the checkpoint needs its witness quorum of cosignatures",
    )
    p.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness's cosigner key (repeatable); with --witness-quorum K, K of them must cosign",
    )
    p.add_argument(
        "--witness-quorum", type=int, metavar="K", help="how many --witness keys must cosign (default all)"
    )
    p.add_argument("--json", action="store_true")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="engram-verify", description="Verify Engram logs offline.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("checkpoint", help="verify a signed checkpoint note")
    p.add_argument("file")
    _common(p)
    p.add_argument(
        "--consistency-proof",
        action="append",
        default=[],
        metavar="FILE",
        help="JSON of `engram log prove-consistency` from a trusted or remembered size (repeatable)",
    )
    p.set_defaults(run=_cmd_checkpoint)
    p = sub.add_parser("bundle", help="verify an attestation bundle and its claim")
    p.add_argument("file")
    _common(p)
    p.add_argument("--audience", help="who you are, for the bundle's share token")
    p.add_argument("--at", type=int, help="verify as of this Unix time (default: now)")
    p.set_defaults(run=_cmd_bundle)
    p = sub.add_parser("token", help="check a share token against an agent's public key")
    p.add_argument("token")
    p.add_argument("--agent-key", required=True, help="the agent's Ed25519 public key, base64")
    p.add_argument("--origin", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--audience", required=True)
    p.add_argument("--kind", action="append", required=True, help="a kind to be disclosed (repeatable)")
    p.add_argument("--at", type=int, help="as of this Unix time (default: now)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_token)
    p = sub.add_parser("log", help="replay and audit an exported tiles directory")
    p.add_argument("dir")
    _common(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes verifying signatures ahead of the replay (default: the CPUs available; "
        "1: none; logs under 4096 entries never use them)",
    )
    p.set_defaults(run=_cmd_log)
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except UsageError as e:
        print(f"engram-verify: error: {e}", file=sys.stderr)
        return 2
    except VerificationError as e:  # an input failed before its report began (e.g. too large)
        report = Report()
        report.fail(_bundle_step(e.check) if args.command == "bundle" else str(args.command), e)
        return _print(report, str(args.command), bool(getattr(args, "json", False)))
    except Exception as e:  # a verifier that cannot finish has not verified: FAILED, never a crash
        report = Report()
        report.fail("verifier", VerificationError(f"{type(e).__name__}: {e}", check="verifier.error"))
        return _print(report, str(args.command), bool(getattr(args, "json", False)))
    return code


def run() -> None:
    """Console entry point."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
