"""The trust oracle (specs/oracle.md): signed, checkpoint-bound answers about an agent.

Everything is computed from the log at one checkpoint (the latest): the agent's record
streams and, for sessions, the memory projection synced to that size. The answer is a
note signed by the log key (:mod:`verifier.oracle`) so a platform can cache it and show
where it came from; claims also come with an evidence bundle that lets a buyer check the
numbers offline (with the agent's share token the bodies are disclosed and the bundle
proves the claim; without one it proves only what needs no bodies).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from engram.protocol.claims import parse_task_claim
from engram.protocol.errors import NotFoundError
from engram.protocol.records import RECORD_KINDS
from ledger.log import Ledger
from ledger.memory.projection import Projection
from verifier.bundle import mean_quality
from verifier.note import sign_note
from verifier.oracle import AGENT_HEADER, CLAIM_HEADER, oracle_text

__all__ = ["DEFINITIONS", "OracleAnswer", "agent_statement", "evaluate_claim", "parse_task_claim"]

DEFINITIONS = {
    "pacts": "pact.outcome records of the agent by result (fulfilled, violated); "
    "'undisclosed' counts records whose body was erased",
    "coverage": "closed sessions in which the agent appended at least one COLD record "
    "(pact.outcome, eval.outcome, boundary.event, commitment) between the session's open and "
    "close, divided by all closed sessions; null when no session is closed",
    "consistency": "for pact.outcome records grouped by task_type ('unspecified' if absent), the "
    "count-weighted mean of each group's population standard deviation of quality (0-100 scale); "
    "lower is more consistent; null with no records",
    "attestation_density": "share of the agent's pact.outcome and eval.outcome records whose body "
    "carries evidence; null with no such records",
}

_CENT = Decimal("0.01")
_MILLI = Decimal("0.0001")


def _dec(value: float | Decimal, q: Decimal = _CENT) -> str:
    return str(Decimal(value).quantize(q, rounding=ROUND_HALF_EVEN))


def _require_agent(ledger: Ledger, agent: str) -> None:
    if not ledger.store.keys_of(agent):
        raise NotFoundError(f"no agent {agent} in this log", check="oracle.agent")


@dataclass(frozen=True, slots=True)
class OracleAnswer:
    """A signed statement, its payload, and the checkpoint note it is bound to."""

    note: bytes
    payload: dict[str, Any]
    checkpoint: bytes
    size: int


def agent_statement(ledger: Ledger, agent: str) -> OracleAnswer:
    """The signed statement about ``agent`` at the latest checkpoint."""
    _require_agent(ledger, agent)
    cp = ledger.latest_checkpoint()
    size = cp.size
    pacts = ledger.stream_bodies(agent, "pact.outcome", size)
    evals = ledger.stream_bodies(agent, "eval.outcome", size)
    payload: dict[str, Any] = {
        "agent": agent,
        "definitions": DEFINITIONS,
        "pacts": _pact_counts(pacts),
        "coverage": _coverage(ledger, agent, size),
        "consistency": _consistency(pacts),
        "attestation_density": _attestation_density([b for _, b in pacts + evals if b is not None]),
        "records": {k: len(ledger.store.stream_indices(agent, k, size)) for k in sorted(RECORD_KINDS)},
    }
    note = sign_note(
        oracle_text(AGENT_HEADER, ledger.origin, size, cp.root, payload),
        ledger.origin,
        ledger.log_key.private_key,
    )
    return OracleAnswer(note=note, payload=payload, checkpoint=cp.note, size=cp.size)


Bodies = list[tuple[int, dict[str, Any] | None]]


def _pact_counts(pacts: Bodies) -> dict[str, int]:
    results = [b["result"] for _, b in pacts if b is not None]
    return {
        "fulfilled": results.count("fulfilled"),
        "violated": results.count("violated"),
        "undisclosed": sum(1 for _, b in pacts if b is None),
    }


def _coverage(ledger: Ledger, agent: str, size: int) -> dict[str, Any]:
    """Of the agent's closed sessions, how many hold one of its records."""
    projection = Projection(ledger.store)
    projection.sync(size)
    record_indices = sorted(i for k in RECORD_KINDS for i in ledger.store.stream_indices(agent, k, size))
    closed = [
        (s.opened_index, s.closed_index)
        for s in projection.sessions(agent)
        if s.status == "closed" and s.closed_index is not None and s.closed_index < size
    ]
    covered = sum(1 for opened, end in closed if any(opened <= i <= end for i in record_indices))
    return {
        "closed_sessions": len(closed),
        "covered_sessions": covered,
        "value": _dec(Decimal(covered) / len(closed), _MILLI) if closed else None,
    }


def _consistency(pacts: Bodies) -> dict[str, Any]:
    """Quality per task type (count, mean, spread), and the spread weighted over all."""
    groups: dict[str, list[int]] = {}
    for _, b in pacts:
        if b is not None:
            groups.setdefault(str(b.get("task_type", "unspecified")), []).append(int(b["quality"]))
    by_type = {}
    spread_sum = 0.0
    n_all = 0
    for t, qs in sorted(groups.items()):
        mean = sum(qs) / len(qs)
        sd = math.sqrt(sum((q - mean) ** 2 for q in qs) / len(qs))
        by_type[t] = {"count": len(qs), "mean_quality": mean_quality(qs), "spread": _dec(sd)}
        spread_sum += sd * len(qs)
        n_all += len(qs)
    return {"by_task_type": by_type, "value": _dec(spread_sum / n_all) if n_all else None}


def _attestation_density(attestable: list[dict[str, Any]]) -> dict[str, Any]:
    attested = sum(1 for b in attestable if b.get("evidence"))
    return {
        "records": len(attestable),
        "with_evidence": attested,
        "value": _dec(Decimal(attested) / len(attestable), _MILLI) if attestable else None,
    }


def evaluate_claim(
    ledger: Ledger, claim: Mapping[str, Any]
) -> tuple[OracleAnswer, dict[str, Any], dict[str, Any]]:
    """Answer a task claim: (the signed verdict, the bundle claim proving the actual figures
    from disclosed bodies, the bundle claim provable without bodies). Completed tasks are ``pact.outcome`` records with result ``fulfilled``
    (and the claimed ``task_type``); the verdict is ``unknown`` when a body that could match
    has been erased, since the oracle then cannot count."""
    c = parse_task_claim(claim)
    agent = c["agent"]
    _require_agent(ledger, agent)
    cp = ledger.latest_checkpoint()
    where: dict[str, Any] = {"result": "fulfilled"}
    if "task_type" in c:
        where["task_type"] = c["task_type"]
    pacts = ledger.stream_bodies(agent, "pact.outcome", cp.size)
    matching = [b for _, b in pacts if b is not None and all(b.get(k) == v for k, v in where.items())]
    undisclosed = sum(1 for _, b in pacts if b is None)
    actual: dict[str, Any] = {"count": len(matching)}
    if matching:
        actual["mean_quality"] = mean_quality([int(b["quality"]) for b in matching])
    if undisclosed:
        verdict, reason = "unknown", f"{undisclosed} pact outcome(s) were erased; the count cannot be known"
    elif actual["count"] != c["count"]:
        verdict, reason = "contradicted", f"the log holds {actual['count']} completed tasks, not {c['count']}"
    elif "mean_quality" in c and actual.get("mean_quality") != c["mean_quality"]:
        verdict, reason = (
            "contradicted",
            f"the mean quality is {actual.get('mean_quality')}, not {c['mean_quality']}",
        )
    else:
        verdict, reason = "supported", "the log's records match the claim"
    payload = {"claim": c, "actual": actual, "verdict": verdict, "reason": reason, "where": where}
    statements: list[dict[str, Any]] = [
        {
            "predicate": "count",
            "agent": agent,
            "kind": "pact.outcome",
            "where": where,
            "value": actual["count"],
        }
    ]
    if "mean_quality" in actual:
        statements.append(
            {
                "predicate": "mean",
                "agent": agent,
                "kind": "pact.outcome",
                "field": "quality",
                "where": where,
                "value": actual["mean_quality"],
            }
        )
    note = sign_note(
        oracle_text(CLAIM_HEADER, ledger.origin, cp.size, cp.root, payload),
        ledger.origin,
        ledger.log_key.private_key,
    )
    public = {
        "statements": [
            {"predicate": "count", "agent": agent, "kind": "pact.outcome", "value": len(pacts)},
        ]
    }
    return (
        OracleAnswer(note=note, payload=payload, checkpoint=cp.note, size=cp.size),
        # With an erased outcome no statement over bodies can verify (claim.undisclosed), and
        # the bundle builder refuses one that would not: the evidence is then the record count.
        public if undisclosed else {"statements": statements},
        public,
    )
