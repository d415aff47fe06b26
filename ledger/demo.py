"""``engram demo``: a realistic end-to-end scenario on the embedded SQLite default.

Two agents (a customer-support agent and a research agent) are registered, work through
several sessions, record pact outcomes, evaluations and commitments, and one of them
rotates its key midway. Along the way the demo shows what the log refuses (a forged
signature, a reused version, a stale ``prev``, the retired key) and ends by proving
inclusion and consistency with the trusted verifier and exporting C2SP tiles.
"""

from __future__ import annotations

import random
import secrets

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from ledger.config import Settings
from ledger.errors import ConflictError, VerificationError
from ledger.log import Ledger, Receipt, Submission
from ledger.sdk import Agent, InProcess
from ledger.tiles import export_tiles
from verifier.event import Leaf
from verifier.merkle import verify_consistency, verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint

__all__ = ["run_demo"]

_TOPICS = ["refund", "shipping delay", "password reset", "invoice", "API quota", "data export"]
_SESSIONS = 20
_FINDINGS = ["latency regression", "cache hit rate", "tokenizer drift", "eval leakage", "retry storm"]


def _open_or_init(settings: Settings, console: Console) -> Ledger:
    if settings.log_key_file.exists():
        console.print(f"using the existing log under {settings.home}")
        return Ledger.open(settings)
    origin = f"localhost/engram-demo-{secrets.token_hex(3)}"
    console.print(f"initialising a new log [bold]{origin}[/] under {settings.home}")
    return Ledger.init_home(settings, origin)


def _unique_agent_id(ledger: Ledger, base: str) -> str:
    if not ledger.store.keys_of(base):
        return base
    return f"{base}-{secrets.token_hex(2)}"


def _session(agent: Agent, rng: random.Random, n_turns: int, topic: str) -> list[Receipt]:
    """One working session: opened, turns, closed, plus the memories it produced."""
    sid = f"s-{rng.getrandbits(32):08x}"
    receipts = [agent.append("session.opened", {"session": sid, "topic": topic})]
    for t in range(n_turns):
        role = "user" if t % 2 == 0 else "assistant"
        receipts.append(
            agent.append(
                "session.turn",
                {"session": sid, "turn": t, "role": role, "text": f"{role} message {t} about {topic}"},
            )
        )
    # Memories of different streams go in one atomic batch.
    receipts += agent.append_many(
        [
            ("session.closed", {"session": sid, "turns": n_turns}),
            (
                "memory.written",
                {
                    "session": sid,
                    "category": "LEARNING",
                    "confidence": rng.randint(60, 99),
                    "content": f"customers asking about {topic} want a timeline first",
                    "tags": [topic.replace(" ", "-")],
                },
            ),
        ]
    )
    return receipts


def run_demo(settings: Settings, console: Console, *, seed: int = 7) -> dict[str, object]:
    rng = random.Random(seed)  # noqa: S311 - scenario content, not secrets
    ledger = _open_or_init(settings, console)
    vkey = ledger.vkey
    transport = InProcess(ledger)
    start_size = ledger.size()
    early_checkpoint = ledger.latest_checkpoint()
    console.rule("[bold]1. Agents register Ed25519 keys (proof of possession, in the log)")
    support = Agent.generate(_unique_agent_id(ledger, "support-bot"), log_vkey=vkey, transport=transport)
    research = Agent.generate(_unique_agent_id(ledger, "research-bot"), log_vkey=vkey, transport=transport)
    for a in (support, research):
        r = a.register({"description": f"{a.agent_id} demo agent"})
        console.print(f"registered [bold]{a.agent_id}[/] key {a.signer.key_id} at index {r.index}")

    console.rule("[bold]2. Agents work: sessions, pact outcomes, evaluations, commitments")
    counts: dict[str, int] = {}
    fulfilled = qualities = 0
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("sessions", total=_SESSIONS)
        for i in range(_SESSIONS):
            topic = rng.choice(_TOPICS)
            receipts = _session(support, rng, rng.randint(6, 14), topic)
            ok = rng.random() < 0.9
            quality = rng.randint(80, 99) if ok else rng.randint(20, 60)
            fulfilled += ok
            qualities += quality
            receipts.append(
                support.append(
                    "pact.outcome",
                    {
                        "pact": f"pact-{i:03d}",
                        "result": "fulfilled" if ok else "violated",
                        "quality": quality,
                        "evidence": f"ticket #{1000 + i} closed",
                    },
                )
            )
            receipts += research.append_many(
                [
                    (
                        "eval.outcome",
                        {
                            "eval": f"bench-{i}",
                            "result": "pass" if rng.random() < 0.8 else "fail",
                            "score": rng.randint(50, 100),
                        },
                    ),
                    (
                        "memory.written",
                        {
                            "category": "PERFORMANCE",
                            "content": f"{rng.choice(_FINDINGS)} noted in run {i}",
                            "confidence": rng.randint(50, 95),
                            "tags": ["run"],
                        },
                    ),
                ]
            )
            if i == 5:
                receipts.append(
                    support.append(
                        "commitment", {"promise": "follow up on open refunds within 24h", "due_days": 1}
                    )
                )
            for r in receipts:
                counts[r.kind] = counts.get(r.kind, 0) + 1
            progress.advance(task)
            if i == _SESSIONS // 2:
                old_signer = support.signer
                rr = support.rotate()
                console.print(
                    f"{support.agent_id} rotated to key {support.signer.key_id} at index {rr.index}"
                )
    table = Table(title="events appended by the agents")
    table.add_column("kind")
    table.add_column("count", justify="right")
    for kind, n in sorted(counts.items()):
        table.add_row(kind, str(n))
    console.print(table)
    console.print(
        f"pact outcomes: {fulfilled} of {_SESSIONS} fulfilled, mean quality {qualities / _SESSIONS:.1f}"
    )

    console.rule("[bold]3. What the log refuses (nothing is written)")
    size_before = ledger.size()
    refusals: list[tuple[str, str]] = []

    def attempt(label: str, subs: list[Submission]) -> None:
        try:
            ledger.append(subs)
        except (VerificationError, ConflictError) as e:
            refusals.append((label, f"{type(e).__name__}: {e}"))
        else:  # pragma: no cover - the demo would be wrong
            raise AssertionError(f"the log accepted {label}")

    head = ledger.stream_head(support.agent_id, "pact.outcome")
    assert head is not None
    good = support.signer.event(
        "pact.outcome",
        {"pact": "pact-x", "result": "fulfilled", "quality": 100},
        version=head.version + 1,
        prev=head.leaf_hash.hex(),
        client_time_us=ledger.clock(),
    )
    forged = Submission(envelope=good.envelope, signature=bytes(64), body=good.body, salt=good.salt)
    attempt("a forged signature", [forged])
    reused = support.signer.event(
        "pact.outcome",
        {"pact": "pact-y", "result": "fulfilled", "quality": 100},
        version=head.version,
        prev=None if head.version == 0 else "00" * 32,
        client_time_us=ledger.clock(),
    )
    attempt("a reused stream version", [reused])
    stale = support.signer.event(
        "pact.outcome",
        {"pact": "pact-z", "result": "fulfilled", "quality": 100},
        version=head.version + 1,
        prev="ab" * 32,
        client_time_us=ledger.clock(),
    )
    attempt("a stale prev link", [stale])
    retired = old_signer.event(
        "pact.outcome",
        {"pact": "pact-w", "result": "fulfilled", "quality": 100},
        version=head.version + 1,
        prev=head.leaf_hash.hex(),
        client_time_us=ledger.clock(),
    )
    attempt("an event signed by the rotated-out key", [retired])
    tampered_body = Submission(
        envelope=good.envelope,
        signature=good.signature,
        body=b'{"pact":"pact-x","quality":0}',
        salt=good.salt,
    )
    attempt("a body that does not match its signed commitment", [tampered_body])
    for label, why in refusals:
        console.print(f"[red]refused[/] {label}: {escape(why)}")
    assert ledger.size() == size_before

    console.rule("[bold]4. Anyone with the log key checks inclusion and consistency")
    log_key = VerifierKey.parse(vkey)
    cp = ledger.latest_checkpoint()
    verified = verify_checkpoint(cp.note, log_key)
    console.print(f"checkpoint verified: origin {verified.origin}, size {verified.size}")
    console.print(cp.note.decode("utf-8").rstrip("\n"), markup=False)
    sample = sorted({start_size, (start_size + verified.size) // 2, verified.size - 1})
    for idx in sample:
        proof = ledger.prove_inclusion(idx, verified.size)
        leaf_bytes = ledger.store.leaf(idx)
        assert leaf_bytes is not None
        leaf = Leaf.from_bytes(leaf_bytes, origin=verified.origin)
        verify_inclusion(
            leaf_hash=leaf.hash, index=idx, size=verified.size, proof=proof.hashes, root=verified.root
        )
        console.print(
            f"entry {idx} ({leaf.envelope.agent} {leaf.envelope.kind} v{leaf.envelope.version}) is in the log: "
            f"{len(proof.hashes)}-hash inclusion proof verified"
        )
    old = early_checkpoint
    cons = ledger.prove_consistency(old.size, verified.size)
    verify_consistency(
        old_size=old.size,
        new_size=verified.size,
        old_root=old.root,
        new_root=verified.root,
        proof=cons.hashes,
    )
    console.print(
        f"the log at size {verified.size} extends the checkpoint at size {old.size}: {len(cons.hashes)}-hash consistency proof verified"
    )

    console.rule("[bold]5. Static C2SP tlog-tiles export for auditors and standard tooling")
    tiles_dir = settings.home / f"tiles-{verified.size}"
    if tiles_dir.exists():
        console.print(f"{tiles_dir} exists already; skipping export")
    else:
        summary = export_tiles(ledger.store, tiles_dir)
        console.print(
            f"exported {summary.hash_tiles} hash tiles and {summary.entry_bundles} entry bundles to {tiles_dir}"
        )

    console.rule("[bold]How to check it yourself")
    home = settings.home
    console.print(f"  ENGRAM_HOME={home} engram log key                        # the log's verifier key")
    console.print(f"  ENGRAM_HOME={home} engram log checkpoint                 # the signed checkpoint note")
    console.print(f"  ENGRAM_HOME={home} engram log prove --index {sample[-1]} --format tlog-proof")
    console.print(f"  ENGRAM_HOME={home} engram log prove-consistency --old {old.size}")
    console.print(
        f"  ENGRAM_HOME={home} engram export tiles DIR   # C2SP tlog-tiles; any RFC 6962 tool can recompute the root"
    )
    console.print("[bold green]demo complete[/]")
    return {
        "size": verified.size,
        "refused": len(refusals),
        "tiles": str(tiles_dir),
        "agents": [support.agent_id, research.agent_id],
        "counts": counts,
    }


if __name__ == "__main__":  # pragma: no cover
    run_demo(Settings.from_env(), Console())
