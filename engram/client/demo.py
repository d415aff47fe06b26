"""``engram demo --server URL``: the user journeys against a running Engram service.

Everything goes over HTTP with the shipped client (:mod:`engram.client.http`): agents register
(operator token) and work in sessions that the service distills; they recall and read their
tiers with signed requests; a second agent is refused the first one's memory and a replayed
request is refused; a buyer fetches a bundle with a share token, proving possession of the
audience key, and verifies it offline; the token is revoked; a platform reads the trust
oracle and checks claims; an auditor replays the whole log from the NDJSON export and
checks it against the signed checkpoint. The server's clock is real time, so the 60-day
lifecycle of the embedded demo is not replayed here.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import time
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engram.client.agent_memory import AgentMemory
from engram.client.http import Buyer, HttpTransport
from engram.client.scenario import TOPICS, turns
from engram.client.sdk import Agent
from engram.protocol.entries import parse_entry_lines
from engram.protocol.errors import EngramError, ForbiddenError, ReplayError
from engram.protocol.httpsign import sign_request
from verifier.bundle import VerifiedBundle, mean_quality
from verifier.note import VerifiedCheckpoint, VerifierKey, verify_checkpoint
from verifier.replay import LogReplay
from verifier.token import TokenError

__all__ = ["main", "run_server_demo"]


def run_server_demo(
    url: str,
    console: Console,
    *,
    operator_token: str | None,
    log_vkey: str | None = None,
    sessions: int = 6,
    seed: int = 7,
) -> dict[str, Any]:
    """The journeys, one step each: (1) the service and its log key, (2) agents work in
    sessions, (3) private memory stays private, (4) a buyer verifies with a share token,
    (5) a platform asks the trust oracle, (6) an auditor replays the log."""
    rng = random.Random(seed)  # noqa: S311 - scenario content, not secrets
    transport = HttpTransport(url, operator_token=operator_token)
    log_vkey, key = _service(url, console, transport, log_vkey)
    support, other, qualities = _work(console, transport, log_vkey, sessions, rng)
    _private(console, transport, key, support, other)
    buyer, verified = _buyer(console, transport, log_vkey, support)
    honest, inflated = _oracle(console, buyer, support, qualities)
    cp = _replay(console, transport, key)
    return {
        "agents": [support.agent_id, other.agent_id],
        "size": cp.size,
        "verdicts": (honest["verdict"], inflated["verdict"]),
        "claims": len(verified.claims),
    }


def _service(
    url: str, console: Console, transport: HttpTransport, log_vkey: str | None
) -> tuple[str, VerifierKey]:
    console.rule(f"[bold]1. The service at {escape(url)}")
    served = transport.request("GET", "/v1/log/key").text.strip()
    if log_vkey is None:
        console.print(
            "[yellow]no --log-key given: trusting the key the server reports (pin it with "
            "`engram log key` on the server's host)[/]"
        )
        log_vkey = served
    elif served != log_vkey:
        raise EngramError("the server's log key is not the pinned one")
    key = VerifierKey.parse(log_vkey)
    cp0 = verify_checkpoint(transport.checkpoint(), key)
    console.print(f"log {key.name}, checkpoint size {cp0.size}, signature verified")

    return log_vkey, key


def _work(
    console: Console, transport: HttpTransport, log_vkey: str, sessions: int, rng: random.Random
) -> tuple[AgentMemory, AgentMemory, list[int]]:
    console.rule("[bold]2. Agents register and work; the service distills each session")
    suffix = secrets.token_hex(3)
    support = AgentMemory(
        Agent.generate(f"support-{suffix}", log_vkey=log_vkey, transport=transport), transport
    )
    other = AgentMemory(
        Agent.generate(f"research-{suffix}", log_vkey=log_vkey, transport=transport), transport
    )
    for m in (support, other):
        r = m.agent.register({"description": "server demo agent"})
        console.print(f"registered [bold]{m.agent_id}[/] at index {r.index} (receipt verified)")
    qualities: list[int] = []
    distilled = 0
    for i in range(sessions):
        topic = rng.choice(TOPICS)
        sid = support.open_session(title=f"{topic} ticket #{2000 + i}")
        for role, content in turns(rng, topic):
            support.turn(sid, role, content)
        ok = rng.random() < 0.85
        q = rng.randint(80, 99) if ok else rng.randint(20, 60)
        if ok:
            qualities.append(q)
        support.record(
            "pact.outcome",
            {
                "pact": f"pact-{suffix}-{i}",
                "result": "fulfilled" if ok else "violated",
                "quality": q,
                "task_type": topic.replace(" ", "-"),
                **({"evidence": f"ticket #{2000 + i} closed"} if ok else {}),
            },
        )
        closed = support.close_session(sid)  # the outcome is recorded inside the session
        distilled += closed.entries
    support.write(
        category="LEARNING",
        content="Refund tickets resolve faster with the order id up front.",
        tags=["refund"],
    )
    other.write(
        category="LEARNING", content="Benchmark runs drift when the tokenizer changes.", tags=["bench"]
    )
    console.print(f"{sessions} sessions closed and distilled into {distilled} memories")
    hits = support.recall("refund order id", include_cold=True)
    console.print(f"recall 'refund order id': {len(hits.hot)} HOT, {len(hits.ranked)} ranked")
    table = Table("tier", "items")
    for tier in ("HOT", "WARM", "COLD"):
        table.add_row(tier, str(len(support.items(tier=tier))))
    console.print(table)
    cold = support.items(tier="COLD")
    if cold:
        it = support.item(cold[0].ref)
        console.print(
            f"item {it.item.ref}: leaf {it.proof.index} included in checkpoint size "
            f"{it.proof.size} (proof verified)"
        )

    return support, other, qualities


def _private(
    console: Console, transport: HttpTransport, key: VerifierKey, support: AgentMemory, other: AgentMemory
) -> None:
    console.rule("[bold]3. Private memory stays private")
    try:
        transport.request(
            "GET",
            f"/v1/agents/{support.agent_id}/memory",
            signer=("agent:" + other.agent_id, other.agent.signer.private_key),
            origin=key.name,
        )
        raise EngramError("another agent read private memory")
    except ForbiddenError as e:
        console.print(f"{other.agent_id} reading {support.agent_id}'s memory: refused (403, {e.check})")
    target = f"/v1/agents/{support.agent_id}/memory"
    headers = sign_request(
        support.agent.signer.private_key,
        origin=key.name,
        method="GET",
        target=target,
        signer="agent:" + support.agent_id,
    )
    transport.request("GET", target, headers=headers)
    try:
        transport.request("GET", target, headers=headers)
        raise EngramError("a replayed request was served")
    except ReplayError:
        console.print("the same signed request sent twice: the replay is refused (401)")


def _buyer(
    console: Console, transport: HttpTransport, log_vkey: str, support: AgentMemory
) -> tuple[Buyer, VerifiedBundle]:
    console.rule("[bold]4. A buyer verifies the pact record with a share token")
    buyer = Buyer(transport, log_vkey=log_vkey, audience_key=Ed25519PrivateKey.generate())
    token = support.mint_token(
        audience=buyer.audience, kinds=["pact.outcome"], expires=int(time.time()) + 3600
    )
    bundle = buyer.bundle(token, agent=support.agent_id, kinds=["pact.outcome"])
    verified = buyer.verify(bundle)
    for c in verified.claims:
        st = c.statement
        where = f" where {json.dumps(st['where'])}" if "where" in st else ""
        console.print(f"  {st['predicate']} {st['kind']}{where} = {c.recomputed}: verified offline")
    support.revoke_token(token)
    try:
        buyer.bundle(token, agent=support.agent_id, kinds=["pact.outcome"])
        raise EngramError("a revoked token was honoured")
    except TokenError as e:
        console.print(f"after revocation the token is refused (403, {e.check})")

    return buyer, verified


def _oracle(
    console: Console, buyer: Buyer, support: AgentMemory, qualities: list[int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    console.rule("[bold]5. A platform asks the trust oracle")
    statement, _ = buyer.oracle_agent(support.agent_id)
    p = statement.payload
    console.print(
        f"signed at size {statement.size}: pacts {p['pacts']}, coverage {p['coverage']['value']}, "
        f"consistency {p['consistency']['value']}, attestation density {p['attestation_density']['value']}"
    )
    mean = mean_quality(qualities) if qualities else None
    claim: dict[str, Any] = {"agent": support.agent_id, "count": len(qualities)}
    if mean is not None:
        claim["mean_quality"] = mean
    honest = buyer.oracle_claim(claim)
    inflated = buyer.oracle_claim({**claim, "count": len(qualities) + 100})
    console.print(f"claim {claim}: {honest['verdict']}; inflated by 100 tasks: {inflated['verdict']}")

    return honest, inflated


def _replay(console: Console, transport: HttpTransport, key: VerifierKey) -> VerifiedCheckpoint:
    console.rule("[bold]6. An auditor replays the whole log from the export")
    cp = verify_checkpoint(transport.checkpoint(), key)
    replay = LogReplay(key.name)
    start = 0
    while start < cp.size:
        resp = transport.request("GET", "/v1/log/entries", params={"start": start, "end": cp.size})
        for leaf in parse_entry_lines(resp.content, start=start):
            replay.add(leaf)
        if replay.size == start:
            raise EngramError("the export returned no entries")
        start = replay.size
    replay.check_checkpoint(cp)
    console.print(f"replayed {replay.size} entries: signatures, keys, streams and root match the checkpoint")
    return cp


def main(argv: list[str] | None = None) -> None:
    """``engram-client-demo URL [--log-key VKEY]``: the journeys from a client-only install
    (the ``client`` extra); registering agents needs ENGRAM_OPERATOR_TOKEN."""
    parser = argparse.ArgumentParser(prog="engram-client-demo", description=main.__doc__)
    parser.add_argument("url", help="the Engram service, e.g. http://127.0.0.1:8000")
    parser.add_argument("--log-key", help="the service log's verifier key, pinned (`engram log key`)")
    args = parser.parse_args(argv)
    try:
        run_server_demo(
            args.url, Console(), operator_token=os.environ.get("ENGRAM_OPERATOR_TOKEN"), log_vkey=args.log_key
        )
    except EngramError as e:
        sys.stderr.write(f"engram-client-demo: {e}\n")
        raise SystemExit(1) from None
