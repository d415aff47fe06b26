"""``engram-verify``: the offline verifier's command line (standard library + cryptography).

    engram-verify checkpoint FILE --log-key KEY [--json]
    engram-verify bundle FILE --log-key KEY [--trusted-checkpoint FILE] [--audience A] [--at T] [--json]
    engram-verify token TOKEN --agent-key B64 --origin O --agent A --audience X --kind K [--at T]
    engram-verify log DIR --log-key KEY [--json] [--quiet]

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
8. ``history``: every earlier checkpoint the log signed (DIR/engram/checkpoints.jsonl) is
   signed by the log key and is a prefix of this log: the log never forked or rewrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from verifier.errors import MalformedError, ProofError, VerificationError
from verifier.merkle import node_hash
from verifier.note import VerifiedCheckpoint, VerifierKey, verify_checkpoint
from verifier.replay import LogReplay
from verifier.tiles import TILE_HEIGHT, TILE_WIDTH, read_bundle, read_file, tile_path, tiles_for_size

__all__ = ["main", "run"]

HISTORY = "engram/checkpoints.jsonl"
MAX_HISTORY_BYTES = 1 << 30


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


def audit_log(root: Path, key: VerifierKey, *, quiet: bool = False) -> Report:
    """Run checks 1-8 over a tiles directory; stop at the first failure."""
    report = Report()
    try:
        cp = verify_checkpoint(read_file(root, "checkpoint", max_bytes=65_536), key)
    except VerificationError as e:
        report.fail("checkpoint", e)
        return report
    report.ok("checkpoint", f"signed by {key.name}+{key.key_id.hex()}: size {cp.size}")

    replay = LogReplay(cp.origin)
    history = _read_history(root, key, report)
    if history is None:
        return report
    remember = {c.size for c in history}
    if 0 in remember:
        replay.remember_root()
    level0: list[bytes] = []
    step = "entries"
    try:
        for n in range(-(-cp.size // TILE_WIDTH)):
            width = min(TILE_WIDTH, cp.size - n * TILE_WIDTH)
            step = "entries"
            leaves = read_bundle(root, n, width)
            for leaf in leaves:
                step = "leaves"
                try:
                    parsed = replay.add(leaf)
                except VerificationError as e:
                    step = _step_of(e)
                    raise
                level0.append(parsed.hash)
                if replay.size in remember:
                    replay.remember_root()
            _progress(replay.size, cp.size, quiet)
    except VerificationError as e:
        report.fail(step, e)
        return report
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
        tiles = _check_tiles(root, level0)
    except VerificationError as e:
        report.fail("tiles", e)
        return report
    report.ok("tiles", f"{tiles} hash tiles equal the tree recomputed from the entries")

    try:
        replay.check_checkpoint(cp)
    except VerificationError as e:
        report.fail("root", e)
        return report
    report.ok("root", f"recomputed root {cp.root.hex()[:16]}... is the checkpoint's")

    try:
        for c in history:
            replay.check_consistency_with(c)
    except VerificationError as e:
        report.fail("history", e)
        return report
    report.ok("history", f"{len(history)} earlier checkpoints are prefixes of this log (no fork, no rewrite)")
    report.summary = {
        "origin": cp.origin,
        "size": cp.size,
        "root": cp.root.hex(),
        "agents": len(agents),
        "streams": len(replay.heads),
        "keys": len(replay.keys.keys),
        "checkpoints": len(history),
    }
    return report


def _read_history(root: Path, key: VerifierKey, report: Report) -> list[VerifiedCheckpoint] | None:
    """Earlier checkpoints, if the export carries them (older exports may not)."""
    if not (root / HISTORY).exists():
        return []
    out: list[VerifiedCheckpoint] = []
    try:
        data = read_file(root, HISTORY, max_bytes=MAX_HISTORY_BYTES)
        last = -1
        for line in data.decode("utf-8").splitlines():
            obj = json.loads(line)
            if not isinstance(obj, dict) or set(obj) != {"size", "note"}:
                raise MalformedError("history lines are {size, note}", check="history.format")
            c = verify_checkpoint(str(obj["note"]).encode("utf-8"), key)
            if c.size != obj["size"] or c.size <= last:
                raise MalformedError(
                    "history sizes must match their notes and increase", check="history.format"
                )
            last = c.size
            out.append(c)
    except (ValueError, UnicodeDecodeError) as e:
        report.fail("history", MalformedError(f"{HISTORY} is not JSON lines: {e}", check="history.format"))
        return None
    except VerificationError as e:
        report.fail("history", e)
        return None
    return out


def _check_tiles(root: Path, level0: Sequence[bytes]) -> int:
    """Compare every hash tile with the tree recomputed from the leaf hashes."""
    size = len(level0)
    levels: list[list[bytes]] = [list(level0)]
    count = 0
    for level, n, width in tiles_for_size(size):
        while len(levels) <= level * TILE_HEIGHT:
            below = levels[-1]
            levels.append([node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)])
        expected = b"".join(levels[level * TILE_HEIGHT][n * TILE_WIDTH : n * TILE_WIDTH + width])
        rel = tile_path(level, n, width)
        got = read_file(root, rel, max_bytes=32 * TILE_WIDTH)
        if got != expected:
            where = next(
                (
                    i
                    for i in range(0, min(len(got), len(expected)), 32)
                    if got[i : i + 32] != expected[i : i + 32]
                ),
                None,
            )
            raise ProofError(
                f"{rel} differs from the recomputed tree (first at hash {where if where is None else where // 32})",
                check="tiles.hash",
            )
        count += 1
    return count


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


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    key = _load_key(args.log_key)
    report = Report()
    try:
        data = Path(args.file).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e}") from e
    try:
        cp = verify_checkpoint(data, key)
        report.ok("checkpoint", f"origin {cp.origin}, size {cp.size}, root {cp.root.hex()}")
        report.summary = {"origin": cp.origin, "size": cp.size, "root": cp.root.hex()}
    except VerificationError as e:
        report.fail("checkpoint", e)
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
    }
    return steps.get(head, head)


def _cmd_bundle(args: argparse.Namespace) -> int:
    from verifier.bundle import verify_bundle

    key = _load_key(args.log_key)
    try:
        data = Path(args.file).read_bytes()
        trusted = Path(args.trusted_checkpoint).read_bytes() if args.trusted_checkpoint else None
    except OSError as e:
        raise UsageError(f"cannot read input: {e}") from e
    report = Report()
    steps: list[tuple[str, str]] = []
    try:
        verified = verify_bundle(
            data, key, trusted_checkpoint=trusted, steps=steps, audience=args.audience, now=args.at
        )
    except VerificationError as e:
        for check, detail in steps:
            report.ok(check, detail)
        report.fail(_bundle_step(e.check), e)
        return _print(report, f"bundle {args.file}", args.json)
    for check, detail in steps:
        report.ok(check, detail)
    report.summary = {
        "origin": verified.checkpoint.origin,
        "size": verified.checkpoint.size,
        "entries": verified.entries,
        "erased": verified.erased,
        "claims": [
            {"statement": c.statement, "recomputed": c.recomputed, "holds": c.holds} for c in verified.claims
        ],
    }
    return _print(report, f"bundle {args.file}", args.json)


def _cmd_token(args: argparse.Namespace) -> int:
    import base64
    import binascii
    import time

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
    report = audit_log(root, key, quiet=args.quiet or args.json)
    return _print(report, f"log {root}", args.json)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"engram-verify: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="engram-verify", description="Verify Engram logs offline.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("checkpoint", help="verify a signed checkpoint note")
    p.add_argument("file")
    p.add_argument("--log-key", required=True, help="the log's verifier key (engram log key)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_checkpoint)
    p = sub.add_parser("bundle", help="verify an attestation bundle and its claim")
    p.add_argument("file")
    p.add_argument("--log-key", required=True, help="the log's verifier key (engram log key)")
    p.add_argument("--trusted-checkpoint", help="a checkpoint you already trust: the bundle must extend it")
    p.add_argument("--audience", help="who you are, for the bundle's share token")
    p.add_argument("--at", type=int, help="verify as of this Unix time (default: now)")
    p.add_argument("--json", action="store_true")
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
    p.add_argument("--log-key", required=True, help="the log's verifier key (engram log key)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_cmd_log)
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except UsageError as e:
        print(f"engram-verify: error: {e}", file=sys.stderr)
        return 2
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
