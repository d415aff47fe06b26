"""Coverage-guided fuzzing with atheris (libFuzzer) of the parsers that take bytes from
outside (issue 15, Deliver 4). The hypothesis fuzz tests (tests/unit/test_parser_fuzz.py,
tests/contract/test_verifier_fuzz.py) run in the suite; this runs longer and is guided by
the code's coverage.

    python -m tests.harness.fuzz                        # every target, 60 s each
    python -m tests.harness.fuzz --seconds 600 --targets leaf,bundle --json fuzz.json

Targets: ``leaf`` and ``envelope`` (verifier.event), ``note`` (a signed note, then verified
as this log's checkpoint), ``jcs`` (strict and canonical JSON), ``policy`` (a witness
policy), ``keys`` (verifier and witness keys), ``token`` (a share token checked against an
agent key), ``bundle`` (an attestation bundle verified against a log key), and every other
parser a command line reaches (issue 25, finding 10): ``imports`` (the Claude Code, Codex,
Hermes and Mem0 memory files ``engram memory import`` reads), ``keyfiles`` (agent and log
signer key files), ``inspect`` (``engram token inspect``), ``entries`` (the leaves export an
auditor replays, ``GET /v1/log/entries``), ``settings`` (every ``ENGRAM_*`` variable, for the
service and the HTTP layer), ``hook`` (a harness hook's payload and transcript) and ``mcp``
(``engram mcp``'s stdio server, its own JSON-RPC reader since issue 26). Each is
seeded with a valid input and mutated by libFuzzer for ``--seconds``.

The contract: every input returns a value or raises Engram's typed error (a
``VerificationError`` names its check). Any other exception is a crash; an input taking more
than ``--timeout`` seconds is a hang; a process over ``--rss-mb`` MiB, or one allocation over
``--malloc-mb`` MiB, is a memory failure. libFuzzer stops at the first and writes the input
(``crash-*``, ``timeout-*``, ``oom-*``) to ``--artifacts``. Prints the executions and the
outcome per target; ``--json`` writes them; exit code 1 if any target failed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGETS = (
    "leaf",
    "envelope",
    "note",
    "jcs",
    "policy",
    "keys",
    "token",
    "bundle",
    "imports",
    "keyfiles",
    "inspect",
    "entries",
    "settings",
    "hook",
    "mcp",
)
ORIGIN = "fuzz.example/log"


def _seeds_and_target(name: str) -> tuple[list[bytes], Callable[[bytes], None]]:
    """(seed inputs, the function libFuzzer calls). Imports Engram inside atheris'
    instrumentation, so the coverage of its own modules guides the mutations."""
    import atheris

    with atheris.instrument_imports(include=["verifier", "engram", "ledger"]):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from engram.protocol.errors import EngramError
        from engram.protocol.keyfiles import LogKey
        from engram.protocol.signer import AgentSigner
        from verifier.errors import VerificationError
        from verifier.event import Envelope, Leaf
        from verifier.jcs import parse_canonical, parse_strict
        from verifier.note import Checkpoint, SignedNote, VerifierKey, sign_note, verify_checkpoint
        from verifier.witness import WitnessKey, WitnessPolicy

    log_key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    vkey = LogKey(ORIGIN, log_key).vkey
    agent_key = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    signer = AgentSigner("alice", agent_key, origin=ORIGIN)
    sub = signer.event("commitment", {"promise": "fuzz me"}, version=0, prev=None, client_time_us=1)
    leaf = Leaf.build(
        index=7,
        timestamp_us=1_900_000_000_000_000,
        envelope=Envelope.from_bytes(sub.envelope),
        signature=sub.signature,
    )
    note = sign_note(Checkpoint(origin=ORIGIN, size=3, root=bytes(32)).text(), ORIGIN, log_key)

    def typed(call: Callable[[], object]) -> None:
        try:
            call()
        except VerificationError as e:
            if not (isinstance(e.check, str) and e.check):
                raise AssertionError(f"a VerificationError without a check: {e!r}") from e
        except EngramError:
            pass

    def text(data: bytes) -> str:
        return data.decode("utf-8", "surrogateescape")

    if name == "leaf":
        return [leaf.raw], lambda d: typed(lambda: Leaf.from_bytes(d))
    if name == "envelope":
        return [sub.envelope], lambda d: typed(lambda: Envelope.from_bytes(d))
    if name == "note":
        parsed_key = VerifierKey.parse(vkey)

        def note_target(d: bytes) -> None:
            typed(lambda: SignedNote.parse(d))
            typed(lambda: verify_checkpoint(d, parsed_key))

        return [note], note_target
    if name == "jcs":

        def jcs_target(d: bytes) -> None:
            typed(lambda: parse_strict(d, max_bytes=65_536, max_containers=1_000))
            typed(lambda: parse_canonical(d, max_bytes=65_536))

        return [sub.envelope, b'{"a":[1,{"b":"\\u00e9"}],"c":null}'], jcs_target
    if name == "policy":
        witness = WitnessKey.from_public_key("w.example/1", agent_key.public_key().public_bytes_raw())
        policy = f"log {vkey}\nwitness W1 {witness}\nquorum W1\n".encode()
        return [policy], lambda d: typed(lambda: WitnessPolicy.parse(d))
    if name == "keys":

        def keys_target(d: bytes) -> None:
            typed(lambda: VerifierKey.parse(text(d)))
            typed(lambda: WitnessKey.parse(text(d)))

        return [vkey.encode()], keys_target
    if name == "token":
        with atheris.instrument_imports(include=["verifier"]):
            from verifier.token import mint, verify_token
        seed = agent_key.private_bytes_raw()
        public = agent_key.public_key().public_bytes_raw()
        token = mint(
            seed=seed,
            origin=ORIGIN,
            agent="alice",
            audience="buyer-1",
            kinds=["pact.outcome"],
            expires=2_000_000_000,
        )

        def token_target(d: bytes) -> None:
            typed(
                lambda: verify_token(
                    text(d),
                    agent_keys=[public],
                    origin=ORIGIN,
                    agent="alice",
                    audience="buyer-1",
                    kinds=["pact.outcome"],
                    now=1_900_000_000,
                )
            )

        return [token.encode()], token_target
    if name == "bundle":
        with atheris.instrument_imports(include=["verifier"]):
            from verifier.bundle import verify_bundle
        seed_bundle = _seed_bundle()
        parsed_key = VerifierKey.parse(seed_bundle[0])
        return [seed_bundle[1]], lambda d: typed(lambda: verify_bundle(d, parsed_key, now=1_900_000_000))
    more = _cli_targets(name, typed, text)
    if more is not None:
        return more
    raise SystemExit(f"unknown target {name!r}; choose from {', '.join(TARGETS)}")


def _cli_targets(
    name: str, typed: Callable[[Callable[[], object]], None], text: Callable[[bytes], str]
) -> tuple[list[bytes], Callable[[bytes], None]] | None:
    """The parsers a command line reaches beyond the verifier's (issue 25, finding 10)."""
    import atheris

    work = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    if name == "imports":
        with atheris.instrument_imports(include=["engram"]):
            from engram.harness.formats import read_source
        layout = {
            "claude-code": ["note.md", "MEMORY.md"],
            "codex": ["memory_summary.md", "MEMORY.md", "rollout_summaries/r.md"],
            "hermes": ["MEMORY.md", "USER.md"],
        }
        for fmt, names in layout.items():
            for n in names:
                (work / fmt / n).parent.mkdir(parents=True, exist_ok=True)

        def imports_target(d: bytes) -> None:
            for fmt, names in layout.items():
                for n in names:
                    (work / fmt / n).write_bytes(d)
                typed(lambda fmt=fmt: read_source(fmt, work / fmt))  # type: ignore[misc]
            (work / "mem0.json").write_bytes(d)
            typed(lambda: read_source("mem0", work / "mem0.json"))

        seed_md = b"---\nname: deploys\ntype: feedback\n---\nDeploys go out on Tuesdays.\n"
        seed_mem0 = (
            b'{"results": [{"id": "1", "memory": "Likes tea", "metadata": {"category": "PREFERENCE"}}]}'
        )
        return [
            seed_md,
            b"v1\n# Summary\n- Uses pnpm\n",
            b"Prefers tabs\n\xc2\xa7\nLikes tea\n",
            seed_mem0,
        ], imports_target
    if name == "keyfiles":
        with atheris.instrument_imports(include=["engram"]):
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

            from engram.protocol.keyfiles import (
                LogKey,
                format_agent_key,
                format_log_signer_key,
                load_agent_key,
                load_log_key,
            )
        key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        path = work / "some.key"

        def keyfiles_target(d: bytes) -> None:
            path.write_bytes(d)
            path.chmod(0o600)
            typed(lambda: load_agent_key(path))
            typed(lambda: load_log_key(path))

        seeds = [format_agent_key("alice", key).encode(), format_log_signer_key(LogKey(ORIGIN, key)).encode()]
        return seeds, keyfiles_target
    if name == "inspect":
        with atheris.instrument_imports(include=["verifier"]):
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

            from verifier.token import inspect, mint
        seed = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))).private_bytes_raw()
        token = mint(
            seed=seed, origin=ORIGIN, agent="alice", audience="b", kinds=["pact.outcome"], expires=2**31
        )
        return [token.encode()], lambda d: typed(lambda: inspect(text(d)))
    if name == "entries":
        with atheris.instrument_imports(include=["engram", "verifier"]):
            from engram.protocol.entries import parse_entry_lines
            from verifier.merkle import leaf_hash
        import base64

        leaf = b"\x00" * 40
        line = json.dumps(
            {"index": 3, "leaf": base64.b64encode(leaf).decode(), "leaf_hash": leaf_hash(leaf).hex()}
        )

        def entries_target(d: bytes) -> None:
            typed(lambda: parse_entry_lines(d, start=3))
            typed(lambda: parse_entry_lines(text(d), start=3, max_entries=1))

        return [(line + "\n").encode()], entries_target
    if name == "settings":
        with atheris.instrument_imports(include=["ledger", "api"]):
            from api.settings import ApiSettings
            from ledger.config import Settings

        def settings_target(d: bytes) -> None:
            env: dict[str, str] = {}
            for raw in text(d).split("\n")[:64]:
                k, _, v = raw.partition("=")
                if k and "\x00" not in k + v and "=" not in k:
                    env["ENGRAM_" + k.removeprefix("ENGRAM_")] = v
            typed(lambda: Settings.from_env(env))
            typed(lambda: ApiSettings.from_env(env))  # one parser: a refusal is a ConfigError

        seed_env = (
            b"HOME=/tmp/x\nHOT_MAX_TOKENS=100\nSIGNER_RECORD_WRITE=before-commit\nRATE_LIMIT_PER_MINUTE=5"
        )
        return [seed_env], settings_target
    if name == "hook":
        with atheris.instrument_imports(include=["engram"]):
            from engram.harness.hooks import last_assistant_text, parse_payload
        transcript = work / "t.jsonl"

        def hook_target(d: bytes) -> None:
            typed(lambda: parse_payload(d))
            transcript.write_bytes(d)
            typed(lambda: last_assistant_text(transcript))

        seed_payload = (
            b'{"session_id": "s", "transcript_path": "/tmp/t", "hook_event_name": "Stop", "cwd": "/"}'
        )
        seed_t = b'{"type": "assistant", "message": {"content": [{"type": "text", "text": "done"}]}}\n'
        return [seed_payload, seed_t], hook_target
    if name == "mcp":
        import io

        with atheris.instrument_imports(include=["engram"]):
            from engram.harness.mcp_stdio import StdioServer
            from engram.protocol.errors import ConfigError

        def no_memory() -> Any:
            raise ConfigError("no memory in the fuzz target")

        def mcp_target(d: bytes) -> None:
            # the stdio server reads anything: every line it prints is one JSON-RPC answer
            out = io.BytesIO()
            StdioServer(no_memory).serve(io.BytesIO(d), out)
            for line in out.getvalue().splitlines():
                answer = json.loads(line)
                if answer.get("jsonrpc") != "2.0" or ("result" in answer) == ("error" in answer):
                    raise AssertionError(f"not a JSON-RPC answer: {line[:200]!r}")

        seed_mcp = (
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}\n'
            b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_write", '
            b'"arguments": {"content": "x", "tags": "[\\"a\\"]"}}}\n'
        )
        return [seed_mcp], mcp_target
    return None


def _seed_bundle() -> tuple[str, bytes]:
    """(log verifier key, a valid bundle) from a throwaway embedded log."""
    from engram.client.sdk import Agent
    from ledger.compose import open_ledger
    from ledger.config import Settings
    from ledger.inprocess import InProcess

    home = Path(tempfile.mkdtemp(prefix="fuzz-bundle-"))
    subprocess.run(
        [str(Path(sys.executable).parent / "engram"), "init", "--origin", ORIGIN],
        env={"ENGRAM_HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
    )
    ledger = open_ledger(Settings.from_env({"ENGRAM_HOME": str(home), "ENGRAM_EMBEDDER": "off"}))
    agent = Agent.generate(
        "alice", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), state_dir=None
    )
    agent.register()
    for q in (91, 95):
        agent.append("pact.outcome", {"pact": f"p{q}", "result": "fulfilled", "quality": q, "evidence": "ci"})
    from ledger.bundle import create_bundle

    claim = {"statements": [{"predicate": "count", "agent": "alice", "kind": "pact.outcome", "value": 2}]}
    return ledger.vkey, create_bundle(ledger, claim, trusted_size=1)


def _child(name: str, corpus: Path, flags: list[str]) -> None:
    import atheris

    seeds, target = _seeds_and_target(name)
    for i, s in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(s)

    def one(data: bytes) -> None:
        target(data)

    atheris.Setup([sys.argv[0], *flags, str(corpus)], one)
    atheris.Fuzz()


_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
_FAILURE = re.compile(
    r"ERROR: libFuzzer: (\S+)|==\d+== ERROR: libFuzzer: (\S+)|Uncaught Python exception", re.M
)


def run_target(name: str, args: argparse.Namespace, artifacts: Path) -> dict[str, Any]:
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    flags = [
        f"-max_total_time={int(args.seconds)}",
        f"-timeout={int(args.timeout)}",
        f"-rss_limit_mb={int(args.rss_mb)}",
        f"-malloc_limit_mb={int(args.malloc_mb)}",
        f"-max_len={int(args.max_len)}",
        f"-artifact_prefix={artifacts}/{name}-",
        "-print_final_stats=1",
    ]
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.harness.fuzz", "--child", name, str(corpus), *flags],
        capture_output=True,
        text=True,
        timeout=args.seconds + 600,
    )
    log = proc.stdout + proc.stderr
    done = _DONE.search(log)
    failure = _FAILURE.search(log)
    ok = proc.returncode == 0 and done is not None and failure is None
    return {
        "target": name,
        "ok": ok,
        "runs": int(done.group(1)) if done else 0,
        "seconds": time.monotonic() - t0,
        "corpus": sum(1 for _ in corpus.iterdir()),
        "peak_rss_mb": int(m.group(1)) if (m := re.search(r"stat::peak_rss_mb:\s+(\d+)", log)) else None,
        "failure": None if ok else (log[-3000:] if log else f"exit code {proc.returncode}"),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], Path(argv[2]), argv[3:])
        return 0
    ap = argparse.ArgumentParser(prog="python -m tests.harness.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated: {', '.join(TARGETS)}")
    ap.add_argument("--seconds", type=float, default=60.0, help="fuzzing time per target (default 60)")
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds one input may take (default 2)")
    ap.add_argument(
        "--rss-mb", type=int, default=1024, help="memory bound of the process, MiB (default 1024)"
    )
    ap.add_argument("--malloc-mb", type=int, default=256, help="bound of one allocation, MiB (default 256)")
    ap.add_argument("--max-len", type=int, default=16_384, help="longest input, bytes (default 16384)")
    ap.add_argument("--artifacts", type=Path, default=Path("."), help="where failing inputs are written")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not names or any(t not in TARGETS for t in names):
        ap.error(f"--targets takes {', '.join(TARGETS)}")
    if not 1 <= args.seconds <= 86_400 or not 1 <= args.timeout <= 60:
        ap.error("--seconds must be 1-86400 and --timeout 1-60")
    args.artifacts.mkdir(parents=True, exist_ok=True)
    print(f"atheris fuzzing: {len(names)} targets, {args.seconds:g} s each")
    results = []
    for name in names:
        r = run_target(name, args, args.artifacts)
        results.append(r)
        verdict = "ok" if r["ok"] else "FAILED"
        print(
            f"  {name:<9} {r['runs']:>10,} executions in {r['seconds']:.0f} s, corpus {r['corpus']}, "
            f"peak RSS {r['peak_rss_mb']} MiB: {verdict}",
            flush=True,
        )
        if not r["ok"]:
            print(r["failure"])
    if args.json is not None:
        args.json.write_text(json.dumps({"targets": results}, indent=2), encoding="utf-8")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
