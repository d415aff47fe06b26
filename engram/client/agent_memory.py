"""One agent's memory, wherever the log is: :class:`AgentMemory`.

The MCP server, the harness hooks, Hermes, the CLI's agent-side commands and SDK users all
call this one class. It holds the agent's key (:class:`Agent` signs every event and verifies
every receipt), gates what the agent writes, plans erasures and verifies every proof it
returns against the log key. Where the log is is its :class:`MemoryTransport`, a narrow
port: signed events go in through ``submit``, every read is one ``ask`` of a frozen query
value (:mod:`engram.protocol.queries`):

* over HTTP, :class:`engram.client.http.HttpTransport` (the memory routes and the one query
  route; no database driver loaded);
* in process, ``ledger.memory.transport.InProcessMemory`` (``Services.transport()``), which
  calls what those routes call.

Answers are the frozen values of :mod:`engram.protocol.answers` (``to_json()`` gives the
plain JSON the MCP tools and the CLI print):

* ``write``/``record``/``supersede``: :class:`Written`; ``turn``/``exempt``: :class:`Appended`;
  ``erase``: :class:`Erased` (an :class:`Appended` that says what became current);
  ``close_session``: :class:`Closed`
* ``recall``: :class:`Recalled` (rows: :class:`RecallRow`); ``items``: :class:`ItemRow`;
  ``sessions``/``session``: :class:`SessionRow`; ``meshes``: :class:`MeshRow`
* ``item``: :class:`Shown`; ``prove``: :class:`Proven`
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

from engram.client.http import HttpTransport, verify_item_proof, verify_receipt
from engram.client.sdk import Agent, Transport
from engram.protocol.answers import (
    ROW_FIELDS,
    Appended,
    Closed,
    Erased,
    ItemRow,
    MeshRow,
    NowCurrent,
    Proven,
    Recalled,
    RecallRow,
    SessionRow,
    Shown,
    Written,
)
from engram.protocol.bodies import (
    closed_body,
    erased_body,
    exempt_body,
    gated_normal,
    opened_body,
    superseded_body,
    turn_body,
    written_body,
)
from engram.protocol.erasure import ErasurePlan, plan_erasure
from engram.protocol.errors import (
    ConfigError,
    EngramError,
    NotFoundError,
    ProofError,
    RejectedEventError,
    StorageError,
    VerificationError,
)
from engram.protocol.gate import WriteGate
from engram.protocol.keyfiles import missing_key_file
from engram.protocol.kinds import kinds_where
from engram.protocol.longtext import recall_query
from engram.protocol.queries import (
    CheckpointQuery,
    CompactQuery,
    EntryQuery,
    HotBlockQuery,
    ItemQuery,
    ItemsQuery,
    MeshesQuery,
    MeshProofQuery,
    Query,
    RecallQuery,
    SessionQuery,
    SessionsQuery,
)
from engram.protocol.redact import count_redactions, redact_body
from engram.protocol.schemas import MAX_QUERY_CHARS, parse_ref
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt
from verifier.event import Leaf
from verifier.merkle import verify_inclusion
from verifier.note import VerifiedCheckpoint, VerifierKey, b64encode, verify_checkpoint
from verifier.state import default_state_dir
from verifier.token import mint, revocation_ids

__all__ = [
    "ROW_FIELDS",
    "AgentMemory",
    "MemoryTransport",
    "connect_remote",
    "recall_rows",
    "verify_proof",
]

_RECORDS = kinds_where(group="record")
_POLICY = kinds_where(signer="policy")

A = TypeVar("A")


@runtime_checkable
class MemoryTransport(Transport, Protocol):
    """Where one agent's memory is: the SDK's :class:`Transport` (submit signed events,
    stream heads, consistency proofs) and one question, :meth:`ask`, whose queries are the
    frozen values of :mod:`engram.protocol.queries` (recall, items, an item's proof,
    sessions, meshes, the HOT block, compaction, the log's checkpoint and entries). The
    face is wide (:class:`AgentMemory`), the port narrow: a new query is one value and its
    handler, not a method on every transport.

    A single submitted event's receipt carries the service's :class:`~engram.protocol.wire.Outcome`
    in ``answer``."""

    def ask(self, signer: AgentSigner, query: Query[A]) -> A:
        """The answer to ``query``, asked as (over HTTP: signed by) ``signer``'s agent;
        unverified (the caller verifies what carries a proof)."""
        ...


def recall_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Recall rows as JSON, cut to :data:`ROW_FIELDS` and labelled with their scope (see
    :meth:`RecallRow.of`)."""
    return [RecallRow.of(r).to_json() for r in rows]


def verify_proof(
    log_key: VerifierKey, *, index: int, leaf: bytes, checkpoint: bytes, proof: Sequence[bytes]
) -> Proven:
    """Check that ``leaf`` is entry ``index`` of a checkpoint the log key signed; returns the
    proof as JSON (base64 hashes) for whoever wants to check it again."""
    cp = verify_checkpoint(checkpoint, log_key)
    lf = Leaf.from_bytes(leaf, origin=cp.origin)
    if lf.index != index:
        raise ProofError(f"the leaf is entry {lf.index}, not {index}", check="proof.index")
    verify_inclusion(leaf_hash=lf.hash, index=index, size=cp.size, proof=list(proof), root=cp.root)
    return Proven(
        index=index,
        size=cp.size,
        leaf_hash=lf.hash.hex(),
        root=b64encode(cp.root),
        proof=[b64encode(h) for h in proof],
        checkpoint=checkpoint.decode("utf-8"),
        agent=lf.envelope.agent,
        kind=lf.envelope.kind,
        timestamp_us=lf.timestamp_us,
    )


class AgentMemory:
    """One agent's memory over a :class:`MemoryTransport` (the agent's own transport)."""

    def __init__(
        self, agent: Agent, transport: MemoryTransport | None = None, *, gate: WriteGate | None = None
    ) -> None:
        """``transport``: the agent's transport (given again, it must be the same one: the
        events the agent signs and the reads go to one log)."""
        t = agent.transport if transport is None else transport
        if t is not agent.transport:
            raise ConfigError("an AgentMemory reads and writes through its agent's transport")
        if not isinstance(t, MemoryTransport):
            raise ConfigError(
                f"{type(t).__name__} reaches a bare log, not a memory service "
                "(use HttpTransport, or Services.transport() in process)"
            )
        self.agent = agent
        self.transport: MemoryTransport = t
        self.gate = gate or WriteGate()
        self._turns: dict[str, int] = {}

    @property
    def agent_id(self) -> str:
        return self.agent.agent_id

    @property
    def _me(self) -> AgentSigner:
        return self.agent.signer

    def _append(self, kind: str, body: Mapping[str, Any], *, given: object) -> tuple[Receipt, int]:
        """Sign and append ``body`` and count the secrets redacted: the markers the signed body
        carries (the signer redacts; redaction is deterministic, so the same pass here counts
        them) beyond those in ``given``, the caller's own texts."""
        redacted = max(0, count_redactions(redact_body(body)) - count_redactions(given))
        return self.agent.append(kind, body), redacted

    def _check_policy(self, receipts: Sequence[Receipt]) -> None:
        """Policy decisions in this agent's streams: included in a log-signed checkpoint
        that is consistent with every checkpoint this agent saw."""
        seen: dict[bytes, VerifiedCheckpoint] = {}  # a batch's decisions share one checkpoint
        for r in receipts:
            known = seen.get(r.checkpoint)
            _, cp = verify_receipt(r, self.agent.log_key, agent=self.agent_id, kinds=_POLICY, verified=known)
            if known is None:
                self.agent.observe(cp)
                seen[r.checkpoint] = cp

    # -- sessions -----------------------------------------------------------------------

    def open_session(self, *, title: str | None = None, session: str | None = None) -> str:
        sid = session or f"s-{secrets.token_hex(6)}"
        self.agent.append("session.opened", opened_body(sid, title))
        self._turns[sid] = 0
        return sid

    def _ask(self, query: Query[A]) -> A:
        return self.transport.ask(self._me, query)

    def sessions(self) -> list[SessionRow]:
        return self._ask(SessionsQuery.of())

    def session(self, session: str) -> SessionRow:
        """The session's state (NotFoundError if the agent has no such session)."""
        return self._ask(SessionQuery.of(session=session))

    def session_turns(self, session: str) -> int | None:
        try:
            return self.session(session).turns
        except (NotFoundError, RejectedEventError):  # no such session, or no such id
            return None

    def turn(self, session: str, role: str, content: str, tool: Mapping[str, Any] | None = None) -> Appended:
        if session not in self._turns:
            self._turns[session] = self.session(session).turns
        receipt, redacted = self._append(
            "session.turn",
            turn_body(session, self._turns[session], role, content, tool),
            given=[content, tool],
        )
        self._turns[session] += 1
        return Appended(index=receipt.index, redacted=redacted)

    def close_session(self, session: str, *, summary: str | None = None) -> Closed:
        """Close; the service distills and files the session (policy-signed decisions, each
        verified against the log key before this returns)."""
        closed, redacted = self._append("session.closed", closed_body(session, summary), given=summary)
        self._turns.pop(session, None)
        out = closed.answer
        if out is None:
            return Closed(closed=closed.index, distilled=None, entries=0, decisions=0, redacted=redacted)
        policy = [*([] if out.distilled is None else [out.distilled]), *out.decisions]
        self._check_policy(policy)
        return Closed(
            closed=closed.index,
            distilled=None if out.distilled is None else out.distilled.index,
            entries=out.entries,
            decisions=len(out.decisions),
            redacted=redacted,
        )

    # -- writes -------------------------------------------------------------------------

    def _written(self, receipt: Receipt, redacted: int) -> Written:
        out = receipt.answer
        if out is not None and out.named:
            ref = out.ref
        else:
            try:
                ref = self._ref_for(receipt.index)
            except EngramError:  # the write is committed: it is answered, its item unnamed
                ref = None
        return Written(
            index=receipt.index,
            ref=ref,
            duplicate=ref is not None and ref != f"{receipt.index}.0",
            redacted=redacted,
        )

    def _ref_for(self, index: int) -> str | None:
        """The item entry ``index`` made or confirmed, found by reading (a service that did
        not name it)."""
        items = self.items(status="all")
        for it in items:
            if it.index == index:
                return it.ref
        mark = {"source_type": "log", "source_ref": str(index)}
        return next((it.ref for it in items if mark in it.provenance), None)

    def write(
        self,
        *,
        category: str,
        content: str,
        tags: Sequence[str] = (),
        confidence: int = 70,
        session: str | None = None,
        tier: str | None = None,
        evidence: str | None = None,
        provenance: Sequence[Mapping[str, str]] = (),
        decay_exempt: bool = False,
    ) -> Written:
        """Gate (refuse threats, redact secrets), sign and append a memory; the item it made,
        or the one it confirmed (a near-duplicate)."""
        body = written_body(
            self.gate,
            category=category,
            content=content,
            tags=tags,
            confidence=confidence,
            evidence=evidence,
            session=session,
            provenance=provenance,
            tier=tier,
            decay_exempt=decay_exempt,
        )
        return self._written(
            *self._append("memory.written", body, given=[content, evidence, list(tags), list(provenance)])
        )

    def record(self, kind: str, body: Mapping[str, Any]) -> Written:
        """A COLD record: pact outcome, evaluation, boundary event, commitment."""
        if kind not in _RECORDS:
            raise RejectedEventError(f"{kind} is not a record kind", check="memory.record")
        return self._written(*self._append(kind, gated_normal(self.gate, kind, body), given=body))

    def supersede(self, ref: str, *, content: str, reason: str) -> Written:
        """An append-only correction of an item (the way COLD changes)."""
        body = superseded_body(self.gate, ref, content=content, reason=reason)
        return self._written(*self._append("memory.superseded", body, given=[content, reason]))

    def exempt(self, ref: str, *, reason: str) -> Appended:
        receipt, redacted = self._append(
            "memory.decay_exempted", exempt_body(ref, reason=reason), given=reason
        )
        return Appended(index=receipt.index, redacted=redacted)

    # -- Memory Mesh (ledger.mesh): signed events in this agent's own streams ------

    def mesh_create(self, name: str, *, title: str | None = None) -> str:
        """Create the mesh ``<this agent>/<name>``; returns its id."""
        mesh = f"{self.agent_id}/{name}"
        body: dict[str, Any] = {"mesh": mesh}
        if title is not None:
            body["title"] = title
        self.agent.append("mesh.created", body)
        return mesh

    def mesh_invite(self, mesh: str, agent: str) -> Appended:
        return Appended(index=self.agent.append("mesh.invited", {"mesh": mesh, "agent": agent}).index)

    def mesh_join(self, mesh: str) -> Appended:
        return Appended(index=self.agent.append("mesh.joined", {"mesh": mesh}).index)

    def mesh_grant(
        self, mesh: str, *, share: Sequence[str], read: Sequence[str], backfill: bool = False
    ) -> Appended:
        """This agent's grant in ``mesh`` (it replaces the earlier one): the WARM categories
        it shares and those it reads; ``backfill`` shares memories older than the grant too."""
        body = {"mesh": mesh, "share": sorted(set(share)), "read": sorted(set(read)), "backfill": backfill}
        return Appended(index=self.agent.append("mesh.granted", body).index)

    def mesh_leave(self, mesh: str) -> Appended:
        return Appended(index=self.agent.append("mesh.left", {"mesh": mesh}).index)

    def mesh_remove(self, mesh: str, agent: str) -> Appended:
        return Appended(index=self.agent.append("mesh.removed", {"mesh": mesh, "agent": agent}).index)

    def mesh_dissolve(self, mesh: str) -> Appended:
        return Appended(index=self.agent.append("mesh.dissolved", {"mesh": mesh}).index)

    def erase(self, index: int, *, reason: str) -> Erased:
        """Erase entry ``index`` and what it fed (engram.protocol.erasure, the plan the
        service checks): one logged ``memory.erased`` deletes the bodies and salts of the
        entry and its closure and names every item they made. The leaves stay, so every
        proof stays valid. The answer says, for each erased memory that was the current value
        of a fact that changed, which value is current now (an earlier one, or none)."""
        plan = self.erasure_plan(index)
        body = erased_body(
            index,
            plan.refs,
            reason=reason,
            also=plan.also,
            sessions=plan.sessions,
            session=plan.session,
            replaced=plan.replaced,
        )
        receipt, redacted = self._append("memory.erased", body, given=reason)
        current = () if receipt.answer is None else receipt.answer.current
        return Erased(
            index=receipt.index,
            redacted=redacted,
            current=[NowCurrent(erased=e, current=c) for e, c in current],
        )

    def erasure_plan(self, index: int) -> ErasurePlan:
        """What erasing entry ``index`` takes with it (the items it made, the entries it fed,
        a session's title or summary), planned from the agent's items and sessions; the
        service checks the same plan when the erasure arrives. Another agent's entry is
        refused here, named as such (its leaf, verified against the log key)."""
        try:
            owner = self.prove(index).agent
        except VerificationError as e:
            if e.check != "proof.index":
                raise
            raise NotFoundError(
                f"cannot erase entry {index}: {str(e).removeprefix('[proof.index] ')}; erase the index a "
                "write answered (`written as ref N.0 at index N`) or that `engram memory recall --json` shows",
                check="memory.erase_index",
            ) from None
        if owner != self.agent_id:
            raise RejectedEventError(f"entry {index} is not one of {self.agent_id}'s", check="memory.erase")
        items = [*self.items(status="all"), *self.items(tier="RECORD", status="all")]
        return plan_erasure(index, items, self.sessions())

    def compact(self) -> list[Receipt]:
        """Apply the time-based rules now; the policy-signed decisions, verified."""
        receipts = self._ask(CompactQuery.of())
        self._check_policy(receipts)
        return receipts

    # -- reads --------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        include_cold: bool = False,
        include_archived: bool = False,
        limit: int = 10,
        budget_tokens: int | None = None,
        session: str | None = None,
        scopes: Sequence[str] | None = None,
        meshes: Sequence[str] | None = None,
    ) -> Recalled:
        """``meshes``: the Memory Meshes whose shared memories join the ranking (None: every
        mesh this agent is a member of; empty: none).

        A query longer than the service takes (``MAX_QUERY_CHARS``, e.g. a whole prompt with
        a pasted traceback) is recalled with the query derived from it
        (:func:`engram.protocol.longtext.recall_query`: its most informative segments), never
        refused; the answer's notes say so."""
        bounded = recall_query(query)
        asked = RecallQuery.of(
            bounded,
            include_cold=include_cold,
            include_archived=include_archived,
            limit=limit,
            budget_tokens=budget_tokens,
            session=session,
            scopes=scopes,
            meshes=meshes,
        )
        out = self._ask(asked)
        if len(query) <= MAX_QUERY_CHARS:
            return out
        note = (
            f"the query was derived from a text of {len(query):,} characters: its most informative "
            f"segments ({len(bounded):,} characters)"
        )
        return dataclasses.replace(out, notes=[*out.notes, note])

    def meshes(self) -> list[MeshRow]:
        """The meshes this agent is a member of: creator, members and each one's grant."""
        return self._ask(MeshesQuery.of())

    def mesh_proof(self, mesh: str, ref: str) -> bytes:
        """A bundle (specs/bundle.md, ``mesh_read``) that proves offline, with the log key
        alone, that memory ``ref`` was written by its author and shared with this agent
        through ``mesh`` under grants valid at the checkpoint: ``engram-verify bundle``.
        The bundle is verified here first, as its buyer will verify it, and must prove exactly
        that claim (``proof.claim``): a service's bundle that fails, or proves another memory,
        mesh or reader, is never handed on as this one."""
        from verifier.bundle import verify_bundle

        data = self._ask(MeshProofQuery.of(mesh=mesh, ref=ref))
        verified = verify_bundle(data, self.agent.log_key)
        asked = {"predicate": "mesh_read", "agent": self.agent_id, "mesh": mesh, "ref": ref}
        claims = [r.statement for r in verified.claims]
        if len(claims) != 1 or {k: claims[0].get(k) for k in asked} != asked:
            raise ProofError(
                f"the service's bundle does not prove that memory {ref} was shared with {self.agent_id} "
                f"through {mesh}",
                check="proof.claim",
            )
        self.agent.observe(verified.checkpoint)
        return data

    def items(self, *, tier: str | None = None, status: str = "active") -> list[ItemRow]:
        """Every item of ``tier`` and ``status`` (all pages)."""
        out: list[ItemRow] = []
        after: str | None = None
        while True:
            page = self._ask(ItemsQuery.of(tier=tier, status=status, after=after))
            out += page.items
            if page.next is None:
                return out
            if (
                not page.items
                or page.items[-1].ref != page.next
                or (after is not None and parse_ref(page.next) <= parse_ref(after))
            ):  # a cursor that does not move forward would page forever
                raise ProofError("the page cursor does not move forward", check="page.next")
            after = page.next

    def item(self, ref: str) -> Shown:
        """An item with its provenance; its leaf, body and inclusion proof are verified
        against a checkpoint signed by the log key before it is returned."""
        p = self._ask(ItemQuery.of(ref=ref))
        _, cp = verify_item_proof(p, self.agent.log_key, agent=self.agent_id, ref=ref)
        self.agent.observe(cp)
        e = p.entry
        proof = verify_proof(
            self.agent.log_key, index=e.index, leaf=e.leaf, checkpoint=e.checkpoint, proof=e.proof
        )
        return Shown(item=p.item, proof=proof)

    def prove(self, index: int) -> Proven:
        e = self._ask(EntryQuery.of(index=index))
        out = verify_proof(
            self.agent.log_key, index=index, leaf=e.leaf, checkpoint=e.checkpoint, proof=e.proof
        )
        self.agent.observe(verify_checkpoint(e.checkpoint, self.agent.log_key))
        return out

    def mint_token(self, *, audience: str, kinds: Sequence[str], expires: int) -> str:
        """A share token signed by the agent's active key (the key never leaves the agent)."""
        return mint(
            seed=self._me.private_key.private_bytes_raw(),
            origin=self._me.origin,
            agent=self.agent_id,
            audience=audience,
            kinds=kinds,
            expires=expires,
        )

    def revoke_token(self, token: str) -> Receipt:
        """Log ``share.revoked`` for the token's root revocation id (attenuations die with it)."""
        ids = revocation_ids(token, agent_keys=[self._me.public_key])
        return self.agent.append("share.revoked", {"token_id": ids[0]})

    def hot_block(self, session: str | None = None, scopes: Sequence[str] | None = None) -> str:
        return self._ask(HotBlockQuery.of(session=session, scopes=scopes))

    def log_key(self) -> str:
        return str(self.agent.log_key)

    def checkpoint(self) -> str:
        note = self._ask(CheckpointQuery.of())
        self.agent.observe(verify_checkpoint(note, self.agent.log_key))
        return note.decode("utf-8")


_DEFAULT_PORTS = {"http": 80, "https": 443}


def service_url(url: str) -> str:
    """``url`` (``--server`` / ``ENGRAM_URL``) in the one spelling pins are kept under: the
    scheme and host in lower case, the scheme's default port left out, no trailing slash, so
    ``http://127.0.0.1:8080``, ``HTTP://127.0.0.1:8080/`` and ``http://127.0.0.1:80`` spelled
    as ``http://127.0.0.1`` name one service and trust one key. Different host names stay
    different services, strictly: ``localhost`` and ``127.0.0.1`` are two (a name can resolve
    elsewhere). A path is kept (a service behind a proxy at a prefix); user info, a query or a
    fragment is refused."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ConfigError(
            f"--server / ENGRAM_URL must be the service's http(s) URL, such as http://127.0.0.1:8080, not {url!r}"
        )
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ConfigError(
            "--server / ENGRAM_URL is the service's URL alone, such as http://127.0.0.1:8080: "
            f"{url!r} carries user info, a query or a fragment"
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"--server / ENGRAM_URL {url!r} names no valid port (1-65535)") from None
    host = parts.hostname.lower()
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def _pin_name(spelling: str) -> str:
    return hashlib.sha256(spelling.encode("utf-8")).hexdigest()


def _pinned_key(url: str) -> Path | None:
    state = default_state_dir()
    if state is None:
        return None
    return Path(state) / "log-keys" / _pin_name(service_url(url))


def _legacy_pins(url: str) -> list[Path]:
    """Pins written before pins were keyed by :func:`service_url` (then by the URL as typed):
    the spelling given now and the usual spellings of the same service."""
    state = default_state_dir()
    if state is None:
        return []
    norm = service_url(url)
    spellings = dict.fromkeys((url, url.strip(), norm + "/"))
    spellings.pop(norm, None)
    return [Path(state) / "log-keys" / _pin_name(s) for s in spellings]


def pin_file(url: str) -> Path | None:
    """Where the log key pinned for ``url`` is kept (None without a verifier state dir)."""
    return _pinned_key(url)


def reset_pin(url: str) -> Path | None:
    """Forget the log key pinned for ``url`` (``engram log pin --reset``), with any pin an
    older version kept under another spelling of it; the next connection pins the key the
    service serves then. Returns the file removed, if any."""
    pin = _pinned_key(url)
    gone = None
    for p in ([] if pin is None else [pin]) + _legacy_pins(url):
        if p.is_file():
            p.unlink()
            gone = gone or p
    return gone


def pinned_key(url: str) -> str | None:
    """The key pinned for ``url``; a pin an older version kept under the URL as typed is
    read and kept again under the normalised URL."""
    pin = _pinned_key(url)
    if pin is None:
        return None
    if pin.is_file():
        return pin.read_text(encoding="utf-8").strip()
    for old in _legacy_pins(url):
        if old.is_file():
            key = old.read_text(encoding="utf-8").strip()
            _write_pin(pin, key)
            return key
    return None


def _write_pin(pin: Path, key: str) -> None:
    pin.parent.mkdir(parents=True, exist_ok=True)
    tmp = pin.with_suffix(".tmp")
    tmp.write_text(key + "\n", encoding="utf-8")
    os.replace(tmp, pin)


def _served_key(url: str, transport: HttpTransport) -> str:
    """The log key the service at ``url`` serves, or an error that says what answers at that
    URL instead and what to give (a page or API path, another web server, a stray port)."""
    try:
        served = transport.request("GET", "/v1/log/key").text.strip()
    except (NotFoundError, StorageError) as e:
        if isinstance(e, StorageError) and not str(e).startswith("the service answered"):
            raise  # nothing answers at all: the transport's message names the URL
        path = urlsplit(url.strip()).path.rstrip("/")
        root = service_url(url)
        hint = (
            f"give the service's root URL, without the path {path}: {root[: len(root) - len(path)]}"
            if path
            else "check the host and port (`engram serve` prints them, and /healthz answers there)"
        )
        what = (
            "an Engram service answers there, but not at this path"
            if isinstance(e, NotFoundError)
            else f"GET /v1/log/key answered HTTP {str(e).removeprefix('the service answered ').split(':')[0]}, "
            "so another web server answers there"
        )
        raise ConfigError(f"no Engram service at {url} ({what}): {hint} (--server / ENGRAM_URL)") from None
    try:
        VerifierKey.parse(served)
    except VerificationError:
        raise ConfigError(
            f"no Engram service at {url}: /v1/log/key there answers no log verifier key; "
            "check the host and port (--server / ENGRAM_URL)"
        ) from None
    return served


def resolve_log_key(url: str, log_key: str | None, transport: HttpTransport) -> str:
    """The log's verifier key: given (``--log-key`` / ``ENGRAM_LOG_KEY``), else the one
    pinned for this URL on first use (in the verifier state directory), else fetched from
    the service and pinned. The service's key is read every time and compared: a service
    whose key differs from the given or pinned one is refused with one message naming both
    keys, the pin and how to re-pin (it once read as "the request signature does not
    verify" on every request)."""
    served = _served_key(url, transport)
    if log_key:
        VerifierKey.parse(log_key)
        if served != log_key:
            raise ConfigError(
                f"the service at {url} serves the log key {served!r}, not the one given "
                f"(--log-key / ENGRAM_LOG_KEY: {log_key!r}): another log is served at that URL. "
                "Check the URL, or give the service's key if you trust this log"
            )
        return log_key
    pin = _pinned_key(url)
    pinned = pinned_key(url)
    if pinned is not None:
        if served != pinned:
            raise ConfigError(
                f"the service at {url} serves the log key {served!r}, but {pinned!r} was pinned for "
                f"that URL on first use ({pin}): another log is served there now. If that is expected "
                f"(a new log), re-pin with `engram log pin --reset --server {url}`; otherwise do not "
                "trust this service"
            )
        return pinned
    if pin is not None:
        _write_pin(pin, served)
    return served


def connect_remote(
    url: str,
    key_file: Path,
    *,
    log_key: str | None = None,
    lite: bool = True,
    timeout_s: float = 30.0,
) -> AgentMemory:
    """The agent of ``key_file`` on the Engram service at ``url``. ``lite`` uses the standard
    library's HTTP client (fast start-up, for hooks and the CLI) instead of httpx."""
    base = service_url(url)  # refuses what is not a service's URL, saying what one looks like
    if not key_file.is_file():
        raise ConfigError(missing_key_file(key_file))
    http: Any = None
    if lite:
        from engram.client.litehttp import LiteHttp

        http = LiteHttp(timeout_s=timeout_s)
    transport = HttpTransport(base, http=http, timeout_s=timeout_s)  # " HTTP://h:80/" is http://h
    vkey = resolve_log_key(url, log_key, transport)
    return AgentMemory(Agent.load(key_file, log_vkey=vkey, transport=transport))
