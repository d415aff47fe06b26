"""The HTTP client of an Engram service (httpx), for agents, buyers and auditors.

* :class:`HttpTransport` is a :class:`engram.client.sdk.Transport`: an :class:`engram.client.sdk.Agent`
  over HTTP signs locally, tracks its stream heads, retries conflicts with the head the
  service reports, and accepts a receipt only after verifying the checkpoint signature,
  the leaf, the inclusion proof and consistency with every checkpoint it saw before. Each
  single event goes to the route of its kind (so closing a session also distills it).
  It is also the memory transport of :class:`engram.client.agent_memory.AgentMemory` over
  HTTP: every read is one signed ``ask`` of a query value (:mod:`engram.protocol.queries`)
  at ``POST /v1/agents/{agent}/ask``, answered as the protocol's frozen values.
* :class:`Buyer` fetches bundles with a share token, proving possession of the audience
  key, and verifies them offline; it also verifies the trust oracle's signed answers.

Problem details from the service become the same typed errors the ledger raises in
process, so callers handle one error tree either way.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote, urlencode

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.item_proof import item_proof_of, verify_item_proof
from engram.client.litehttp import LiteHttp, suffices
from engram.client.sdk import DEFAULT_STATE
from engram.protocol.answers import EntryProof, ItemPage, ItemRow, MeshRow, Recalled, SessionRow
from engram.protocol.claims import parse_task_claim
from engram.protocol.errors import (
    AuthError,
    ConflictError,
    LogIntegrityError,
    MalformedError,
    NotFoundError,
    ProofError,
    RateLimitedError,
    StorageError,
    VerificationError,
    VersionConflictError,
)
from engram.protocol.httpsign import audience_for_key, sign_request
from engram.protocol.kinds import NAMES_ITEM, require_kind
from engram.protocol.problems import problem_type_named
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
from engram.protocol.schemas import parse_ref
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import InclusionProof, Outcome, Receipt, StreamState, Submission
from verifier.bundle import VerifiedBundle, verify_bundle
from verifier.event import Envelope, Leaf
from verifier.merkle import verify_inclusion
from verifier.note import (
    Checkpoint,
    SignedNote,
    VerifiedCheckpoint,
    VerifierKey,
    b64decode_strict,
    b64encode,
    verify_checkpoint,
)
from verifier.oracle import AGENT_HEADER, CLAIM_HEADER, OracleStatement, verify_oracle_statement
from verifier.state import CheckpointStore, default_state_dir, require_extends

if TYPE_CHECKING:
    import httpx

__all__ = ["ROUTES", "Buyer", "HttpTransport", "item_proof_of", "verify_item_proof", "verify_receipt"]

A = TypeVar("A")


#: Where a single event is submitted (specs/http-api.md): one small function per registered
#: kind, given the agent's base path and the exact body bytes; None sends it to the generic
#: ``POST /v1/events`` (policy kinds, which the service signs itself, are never sent).
Route = Callable[[str, bytes], str | None]


def _session_path(suffix: str) -> Route:
    def route(base: str, body: bytes) -> str:
        return f"{base}/sessions/{quote(str(json.loads(body)['session']), safe='')}{suffix}"

    return route


def _fixed(path: str) -> Route:
    return lambda base, body: path


def _under(path: str) -> Route:
    return lambda base, body: base + path


def _generic(base: str, body: bytes) -> None:
    return None


ROUTES: dict[str, Route] = {
    "key.registered": _fixed("/v1/agents"),
    "key.rotated": _under("/keys/rotate"),
    "key.revoked": _under("/keys/revoke"),
    "session.opened": _under("/sessions"),
    "session.turn": _session_path("/turns"),
    "session.closed": _session_path("/close"),
    "memory.written": _under("/memories"),
    "memory.distilled": _generic,
    "memory.tier_changed": _generic,
    "memory.superseded": _under("/memories"),
    "memory.decay_exempted": _under("/memories"),
    "memory.archived": _generic,
    "memory.replaced": _generic,
    "memory.accessed": _generic,
    "memory.erased": _under("/memories"),
    "pact.outcome": _under("/records"),
    "eval.outcome": _under("/records"),
    "boundary.event": _under("/records"),
    "commitment": _under("/records"),
    "share.revoked": _under("/tokens/revoke"),
    "mesh.created": _generic,
    "mesh.invited": _generic,
    "mesh.joined": _generic,
    "mesh.granted": _generic,
    "mesh.left": _generic,
    "mesh.removed": _generic,
    "mesh.dissolved": _generic,
}


def _unb64(s: str) -> bytes:
    return b64decode_strict(s, check="response.base64")


class HttpResponse(Protocol):
    """What the transport reads of an answer (an ``httpx.Response`` or a
    :class:`~engram.client.litehttp.LiteResponse`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


class HttpClient(Protocol):
    def request(
        self, method: str, url: str, *, content: bytes | None = ..., headers: Mapping[str, str] | None = ...
    ) -> HttpResponse: ...


def _is_transport_error(e: Exception) -> bool:
    import sys

    httpx_mod = sys.modules.get("httpx")
    return httpx_mod is not None and isinstance(e, httpx_mod.HTTPError)


def _retry_after_s(resp: HttpResponse) -> int:
    """A 429's ``Retry-After`` in whole seconds, at least 1 (RFC 9110 section 10.2.3:
    delay-seconds, digits only). Anything else (a date, a fraction, a sign, nan, inf, empty)
    reads as 1: a zero, negative or non-finite wait would have the client ask again at once,
    forever, or crash on an untyped error."""
    value = (resp.headers.get("retry-after") or "").strip()
    if not (value.isascii() and value.isdigit()):
        return 1
    return _MAX_RETRY_AFTER_S if len(value) > 9 else min(max(1, int(value)), _MAX_RETRY_AFTER_S)


#: The longest ``Retry-After`` a rate limit reports (a day; digits beyond are not parsed).
_MAX_RETRY_AFTER_S = 86_400


def _raise_problem(resp: HttpResponse) -> None:
    """Turn an RFC 9457 problem into the typed error its ``type`` names (the table shared with
    the service, :data:`engram.protocol.problems.PROBLEMS`)."""
    try:
        p = resp.json()
    except ValueError:
        p = {}
    if not isinstance(p, dict):
        p = {}
    detail = str(p.get("detail") or getattr(resp, "reason_phrase", "") or f"HTTP {resp.status_code}")
    check = p.get("check") if isinstance(p.get("check"), str) else None
    row = problem_type_named(str(p.get("type", "")))
    if row is None or row.status != resp.status_code:
        raise StorageError(f"the service answered {resp.status_code}: {detail}")
    stream = p.get("stream")
    if issubclass(row.error, ConflictError) and isinstance(stream, dict):
        raise VersionConflictError(
            detail,
            agent=str(stream.get("agent")),
            kind=str(stream.get("kind")),
            head_version=p.get("head_version"),
            head_leaf_hash=p.get("head_leaf_hash"),
        )
    if issubclass(row.error, RateLimitedError):
        raise RateLimitedError(detail, retry_after_s=_retry_after_s(resp))
    if issubclass(row.error, VerificationError):
        raise row.error(detail, check=check)
    if issubclass(row.error, LogIntegrityError):
        raise LogIntegrityError(detail, check=check or "integrity")
    if issubclass(row.error, ConflictError):  # a conflict that does not name its stream
        raise StorageError(f"the service answered {resp.status_code} without the stream head: {detail}")
    raise row.error(detail)


def _wire(sub: Submission) -> dict[str, str]:
    return {
        "envelope": b64encode(sub.envelope),
        "signature": b64encode(sub.signature),
        "body": b64encode(sub.body),
        "salt": b64encode(sub.salt),
    }


def _current(out: Mapping[str, Any]) -> tuple[tuple[str, str | None], ...]:
    """An erasure's answer: for each erased memory that was a fact's current value, the value
    current now (absent from older services' answers). A malformed list is refused."""
    rows = out.get("current") or []
    if not isinstance(rows, list) or len(rows) > 1000:
        raise ProofError(
            "the erasure's answer names what is current in a malformed list", check="erase.answer"
        )
    pairs: list[tuple[str, str | None]] = []
    for row in rows:
        erased, now = (row.get("erased"), row.get("current")) if isinstance(row, dict) else (None, None)
        if not isinstance(erased, str) or not (now is None or isinstance(now, str)):
            raise ProofError(
                "the erasure's answer names what is current in a malformed list", check="erase.answer"
            )
        pairs.append((erased, now))
    return tuple(pairs)


def _receipt(r: Mapping[str, Any]) -> Receipt:
    """A receipt as the service sent it; nothing in it is trusted until verified."""
    leaf = _unb64(r["leaf"])
    cp_note = str(r["checkpoint"]).encode("utf-8")
    cp = Checkpoint.parse_text(SignedNote.parse(cp_note).text)
    return Receipt(
        index=int(r["index"]),
        timestamp_us=int(r["timestamp_us"]),
        leaf_hash=bytes.fromhex(r["leaf_hash"]),
        leaf=leaf,
        agent=str(r["agent"]),
        kind=str(r["kind"]),
        version=int(r["version"]),
        checkpoint=str(r["checkpoint"]).encode("utf-8"),
        proof=InclusionProof(
            index=int(r["index"]),
            size=cp.size,
            leaf_hash=bytes.fromhex(r["leaf_hash"]),
            root=cp.root,
            hashes=tuple(_unb64(h) for h in r["proof"]),
            checkpoint=str(r["checkpoint"]).encode("utf-8"),
        ),
    )


def verify_receipt(
    receipt: Receipt,
    log_key: VerifierKey,
    *,
    agent: str,
    kinds: Collection[str],
    verified: VerifiedCheckpoint | None = None,
) -> tuple[Leaf, VerifiedCheckpoint]:
    """Check a receipt for an event the caller did not sign itself (a policy decision in
    its streams): the checkpoint is the log's, the leaf is included in it, and the leaf is
    ``agent``'s, of one of ``kinds``, and exactly what the receipt's other fields say.
    The caller also checks the checkpoint against the ones it saw (no fork).

    ``verified``: what :func:`verify_checkpoint` returned for exactly these checkpoint bytes
    (the receipts of one batch share their checkpoint), so its signature is not checked
    again; given for other bytes, the receipt is refused."""
    if verified is None:
        cp = verify_checkpoint(receipt.checkpoint, log_key)
    elif verified.note != receipt.checkpoint:
        raise ProofError(
            "the receipt names another checkpoint than the one verified", check="receipt.checkpoint"
        )
    else:
        cp = verified
    leaf = Leaf.from_bytes(receipt.leaf, origin=cp.origin)
    env = leaf.envelope
    if (
        leaf.index != receipt.index
        or leaf.hash != receipt.leaf_hash
        or leaf.timestamp_us != receipt.timestamp_us
        or (env.agent, env.kind, env.version) != (receipt.agent, receipt.kind, receipt.version)
    ):
        raise ProofError("the receipt's fields disagree with its leaf", check="receipt.leaf")
    if env.agent != agent or env.kind not in kinds:
        raise ProofError(
            f"the receipt is for {env.agent}/{env.kind}, not one of {agent}'s {sorted(kinds)}",
            check="receipt.stream",
        )
    verify_inclusion(
        leaf_hash=leaf.hash, index=leaf.index, size=cp.size, proof=receipt.proof.hashes, root=cp.root
    )
    return leaf, cp


class HttpTransport:
    """How an :class:`~engram.client.sdk.Agent` reaches an Engram service over HTTP."""

    def __init__(
        self,
        base_url: str,
        *,
        operator_token: str | None = None,
        http: httpx.Client | HttpClient | None = None,
        timeout_s: float = 60.0,
        max_wait_s: float = 30.0,
    ) -> None:
        """``http``: the client requests go through. By default a
        :class:`~engram.client.litehttp.LiteHttp` (standard library, kept-alive connections,
        bounded answers) for a plain ``http://`` service without a proxy, where it is enough
        (:func:`~engram.client.litehttp.suffices`), and an ``httpx.Client`` otherwise
        (``https``, proxies from the environment); or any client given (an ``httpx.Client``,
        a test client)."""
        self.base_url = base_url.rstrip("/")
        if http is None:
            if suffices(self.base_url):
                http = LiteHttp(timeout_s=timeout_s)
            else:
                import httpx

                http = httpx.Client(timeout=timeout_s)
        self.http: HttpClient = http
        self.operator_token = operator_token
        self.max_wait_s = max_wait_s
        #: the largest checkpoint size seen in a receipt; sent as Engram-Known-Size so that
        #: receipts carry the consistency proof from it (verified by the Agent, never trusted)
        self.known_size: int | None = None
        #: index of the last entry this client saw acknowledged (reads ask for at least it)
        self.last_index: int | None = None
        self._proofs: dict[tuple[int, int], list[bytes]] = {}

    # -- plumbing ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        signer: tuple[str, Ed25519PrivateKey] | None = None,
        origin: str | None = None,
    ) -> HttpResponse:
        """One request; waits out 429s (up to ``max_wait_s`` in all); raises typed errors.

        With ``signer`` (``("agent:<id>" | "ed25519:<hex>", key)``) the request is signed
        over the exact path, query and body bytes sent (a fresh nonce on every attempt).
        """
        target = path + ("?" + urlencode(params, doseq=True) if params else "")
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        waited = 0.0
        while True:
            h = {"content-type": "application/json"} if body is not None else {}
            h.update(headers or {})
            if signer is not None:
                if origin is None:
                    raise MalformedError("a signed request needs the log origin", check="auth.origin")
                h.update(
                    sign_request(
                        signer[1], origin=origin, method=method, target=target, signer=signer[0], body=data
                    )
                )
            try:
                resp = self.http.request(method, self.base_url + target, content=data or None, headers=h)
            except StorageError:
                raise
            except Exception as e:
                if not _is_transport_error(e):
                    raise
                raise StorageError(f"cannot reach the Engram service at {self.base_url}: {e}") from e
            if resp.status_code == 429:
                wait = float(_retry_after_s(resp))
                if waited + wait <= self.max_wait_s:
                    time.sleep(wait)
                    waited += wait
                    continue
            if resp.status_code >= 400:
                _raise_problem(resp)
            return resp

    def _operator(self) -> dict[str, str]:
        if not self.operator_token:
            raise AuthError("registering an agent needs the operator token", check="auth.operator")
        return {"authorization": f"Bearer {self.operator_token}"}

    # -- Transport ---------------------------------------------------------------------

    def _remember(self, raw: Mapping[str, Any], answer: Outcome | None = None) -> Receipt:
        r = dataclasses.replace(_receipt(raw), answer=answer)
        c = raw.get("consistency")
        if isinstance(c, dict) and isinstance(c.get("old_size"), int):
            self._proofs[(c["old_size"], r.proof.size)] = [_unb64(h) for h in c["proof"]]
            if len(self._proofs) > 64:
                self._proofs.pop(next(iter(self._proofs)))
        self.known_size = max(self.known_size or 0, r.proof.size)
        self.last_index = max(self.last_index if self.last_index is not None else -1, r.index)
        return r

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        headers = self._operator() if operator else {}
        if self.known_size:
            headers["engram-known-size"] = str(self.known_size)
        if len(submissions) != 1:
            resp = self.request(
                "POST", "/v1/events", body={"events": [_wire(s) for s in submissions]}, headers=headers
            )
            return [self._remember(r) for r in resp.json()["receipts"]]
        sub = submissions[0]
        env = Envelope.from_bytes(sub.envelope)
        kind = require_kind(env.kind).name  # an unknown kind is refused here, not sent anywhere
        route = ROUTES[kind](f"/v1/agents/{quote(env.agent, safe='')}", sub.body)
        if route is None:
            resp = self.request("POST", "/v1/events", body={"events": [_wire(sub)]}, headers=headers)
            return [self._remember(r) for r in resp.json()["receipts"]]
        out = self.request("POST", route, body=_wire(sub), headers=headers).json()
        if kind == "session.closed":
            outcome = Outcome(
                distilled=None if out.get("distilled") is None else _receipt(out["distilled"]),
                entries=int(out.get("entries", 0)),
                decisions=tuple(_receipt(r) for r in out.get("decisions", [])),
            )
            return [self._remember(out["closed"], answer=outcome)]
        if "ref" not in out:  # key and token routes answer the receipt alone
            return [self._remember(out.get("receipt", out), answer=Outcome())]
        ref = out["ref"]
        outcome = Outcome(
            named=kind in NAMES_ITEM, ref=ref if isinstance(ref, str) else None, current=_current(out)
        )
        return [self._remember(out["receipt"], answer=outcome)]

    def head(self, agent: str, kind: str) -> StreamState | None:
        try:
            h = self.request("GET", f"/v1/agents/{quote(agent, safe='')}/streams/{kind}").json()
        except NotFoundError:
            return None
        return StreamState(int(h["version"]), str(h["leaf_hash"]))

    def consistency(self, old_size: int, new_size: int) -> Sequence[bytes]:
        """The proof that came with a receipt, else asked for (the Agent verifies either)."""
        cached = self._proofs.pop((old_size, new_size), None)
        if cached is not None:
            return cached
        p = self.request("GET", "/v1/proofs/consistency", params={"old": old_size, "new": new_size}).json()
        return [_unb64(h) for h in p["proof"]]

    def checkpoint(self) -> bytes:
        return self.request("GET", "/checkpoint").content

    # -- one agent's memory (signed requests; the memory transport of AgentMemory) ------

    def signed(self, signer: AgentSigner, method: str, path: str, **kw: Any) -> HttpResponse:
        """A request signed by the agent. Read-your-writes without waiting for the latest
        checkpoint: it names this client's last acknowledged write, and the server answers
        once its memory projection holds it."""
        if self.last_index is not None:
            kw["headers"] = {"engram-min-index": str(self.last_index), **(kw.get("headers") or {})}
        return self.request(
            method, path, signer=("agent:" + signer.agent, signer.private_key), origin=signer.origin, **kw
        )

    def log_key(self) -> str:
        return self.request("GET", "/v1/log/key").text.strip()

    def ask(self, signer: AgentSigner, query: Query[A]) -> A:
        """One question of the agent's memory, signed by it (``POST /v1/agents/{agent}/ask``);
        the answer read back into the protocol's frozen value, unverified. An answer of the
        wrong shape is a :class:`ProofError` (``answer.shape``)."""
        resp = self.signed(signer, "POST", f"{_base(signer)}/ask", body=query.to_json())
        if isinstance(query, MeshProofQuery | CheckpointQuery):
            raw: A = resp.content  # type: ignore[assignment]  # these queries answer bytes
            return raw
        try:
            answer: A = _ANSWERS[type(query)](_answer_to(resp.json(), query.name))
        except (KeyError, TypeError, ValueError, AttributeError, MalformedError) as e:
            raise ProofError(f"the {query.name} answer is malformed: {e}", check="answer.shape") from None
        return answer


def _answer_to(out: Any, name: str) -> Any:
    if out.get("ask") != name:
        raise ValueError(f"the answer is to {out.get('ask')!r}, not {name!r}")
    return out["answer"]


def _entry_proof(e: Mapping[str, Any]) -> EntryProof:
    return EntryProof(
        index=int(e["index"]),
        leaf=_unb64(e["leaf"]),
        leaf_hash=bytes.fromhex(e["leaf_hash"]),
        size=int(e["size"]),
        root=_unb64(e["root"]),
        proof=tuple(_unb64(h) for h in e["proof"]),
        checkpoint=str(e["checkpoint"]).encode("utf-8"),
    )


def _page(p: Mapping[str, Any]) -> ItemPage:
    return ItemPage(items=[ItemRow.of(i) for i in p["items"]], next=p["next"])


def _text(a: Any) -> str:
    if not isinstance(a, str):
        raise TypeError("the answer is not text")
    return a


def _base(signer: AgentSigner) -> str:
    return f"/v1/agents/{quote(signer.agent, safe='')}"


def _next_page(page: Mapping[str, Any], after: str | None) -> str | None:
    """The cursor of the next page, refusing one that does not move forward (a server
    could otherwise keep a client paging forever)."""
    nxt = page.get("next")
    if nxt is None:
        return None
    items = page.get("items") or []
    if not items or items[-1].get("ref") != nxt or (after is not None and parse_ref(nxt) <= parse_ref(after)):
        raise ProofError("the page cursor does not move forward", check="page.next")
    return str(nxt)


class Buyer:
    """A third party holding an agent's share token and the audience key it names."""

    def __init__(
        self,
        transport: HttpTransport,
        *,
        log_vkey: str,
        audience_key: Ed25519PrivateKey,
        state_dir: Path | str | None = DEFAULT_STATE,
        witnesses: Callable[[VerifiedCheckpoint], tuple[str, ...]] | None = None,
    ) -> None:
        """``state_dir``: where the newest checkpoint this buyer verified is remembered
        (default ``$ENGRAM_VERIFIER_STATE`` or ``~/.local/state/engram/verifier``; ``None``:
        nothing remembered). Every bundle and oracle answer must then extend it: an older
        checkpoint is a rollback, another root a fork. ``witnesses``: a witness policy
        (:class:`verifier.witness.WitnessPolicy`, or any callable checking a verified
        checkpoint) every bundle's checkpoint must pass: a split view cannot gather the
        witnesses' cosignatures (``witness.quorum``)."""
        self.transport = transport
        self.log_key = VerifierKey.parse(log_vkey)
        self.key = audience_key
        self.audience = audience_for_key(audience_key.public_key().public_bytes_raw())
        directory = default_state_dir() if state_dir == DEFAULT_STATE else state_dir
        self.state = None if directory is None else CheckpointStore(directory)
        self.witnesses = witnesses

    def remembered(self) -> VerifiedCheckpoint | None:
        """The newest checkpoint this buyer verified for the log (``None`` if none, or no state)."""
        return None if self.state is None else self.state.latest(self.log_key)

    def _remember(self, cp: VerifiedCheckpoint, proofs: Mapping[int, Sequence[bytes]] | None = None) -> None:
        """Require ``cp`` to extend the remembered checkpoint (proofs from the bundle, else
        fetched: either is checked against both signed roots), then remember it."""
        if self.state is None:
            return
        with self.state.locked(self.log_key) as update:
            old = update.remembered
            if old is not None and old.size > cp.size:
                require_extends(old, cp, None, prefix="state")  # raises state.rollback
            update.advance(cp, lambda o, n: (proofs or {}).get(o) or self.transport.consistency(o, n))

    def _signed(self, method: str, path: str, token: str, **kw: Any) -> HttpResponse:
        return self.transport.request(
            method,
            path,
            signer=(self.audience, self.key),
            origin=self.log_key.name,
            headers={"engram-share-token": token},
            **kw,
        )

    def bundle(
        self, token: str, *, agent: str, kinds: Sequence[str], trusted_size: int | None = None
    ) -> bytes:
        params: list[tuple[str, Any]] = [("agent", agent), *(("kind", k) for k in kinds)]
        remembered = self.remembered()
        if trusted_size is None and remembered is not None:
            trusted_size = remembered.size  # so the bundle proves it extends what we verified
        if trusted_size is not None:
            params.append(("trusted_size", trusted_size))
        return self._signed("GET", "/v1/bundles", token, params=params).content

    def verify(self, bundle: bytes, *, trusted_checkpoint: bytes | None = None) -> VerifiedBundle:
        """Verify offline (the service is not trusted): signatures, proofs, completeness,
        claim, the witness policy; then that the bundle extends what this buyer verified before."""
        vb = verify_bundle(
            bundle,
            self.log_key,
            now=int(time.time()),
            audience=self.audience,
            trusted_checkpoint=trusted_checkpoint,
            witnesses=self.witnesses,
        )
        self._remember(vb.checkpoint, vb.consistency)
        return vb

    def items(self, token: str, *, agent: str, tier: str | None = None) -> list[dict[str, Any]]:
        """Every item of the agent the token lets this audience see (all pages)."""
        out: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            params = {"status": "active", "limit": 1000} | ({"tier": tier} if tier else {})
            if after:
                params["after"] = after
            page = self._signed(
                "GET", f"/v1/agents/{quote(agent, safe='')}/memory", token, params=params
            ).json()
            out += page["items"]
            after = _next_page(page, after)
            if after is None:
                return out

    def oracle_agent(self, agent: str) -> tuple[OracleStatement, dict[str, Any]]:
        out = self.transport.request("GET", f"/v1/oracle/agents/{quote(agent, safe='')}").json()
        cp = verify_checkpoint(str(out["checkpoint"]).encode("utf-8"), self.log_key)
        st = verify_oracle_statement(str(out["statement"]).encode("utf-8"), self.log_key, checkpoint=cp)
        self._remember(cp)
        if st.header != AGENT_HEADER or st.payload.get("agent") != agent or st.payload != out["payload"]:
            raise ProofError(f"the oracle's signed statement is not about {agent}", check="oracle.payload")
        return st, out

    def oracle_claim(self, claim: Mapping[str, Any], *, token: str | None = None) -> dict[str, Any]:
        """Ask the oracle; verify that its signed verdict answers *this* claim, and verify
        its evidence bundle offline: that it extends the verdict's checkpoint, is about the
        claim's agent and ``pact.outcome``, and (with a token) recomputes the signed figures."""
        asked = parse_task_claim(claim)
        if token is None:
            out: dict[str, Any] = self.transport.request("POST", "/v1/oracle/claims", body=dict(claim)).json()
        else:
            out = self._signed("POST", "/v1/oracle/claims", token, body=dict(claim)).json()
        cp = verify_checkpoint(str(out["checkpoint"]).encode("utf-8"), self.log_key)
        st = verify_oracle_statement(str(out["statement"]).encode("utf-8"), self.log_key, checkpoint=cp)
        self._remember(cp)
        _check_verdict(st, asked, out, disclosed=token is not None)
        evidence = json.dumps(out["evidence"], separators=(",", ":"), sort_keys=True).encode()
        vb = verify_bundle(
            evidence,
            self.log_key,
            now=int(time.time()),
            audience=self.audience if token else None,
            trusted_checkpoint=cp.note,
        )
        _check_evidence(vb, st.payload, asked, cp, disclosed=token is not None)
        out["evidence_verified"] = vb
        return out


def _check_verdict(
    st: OracleStatement, asked: Mapping[str, Any], out: Mapping[str, Any], *, disclosed: bool
) -> None:
    """The oracle's signed verdict answers *this* claim, and the answer repeats it."""
    p = st.payload
    if (
        st.header != CLAIM_HEADER
        or p.get("claim") != asked
        or p.get("verdict") != out["verdict"]
        or p.get("actual") != out["actual"]
        or p.get("reason") != out["reason"]
        or out["evidence_discloses_bodies"] != disclosed
    ):
        raise ProofError(
            "the oracle's signed verdict is not the answer to this claim", check="oracle.payload"
        )


def _check_evidence(
    vb: VerifiedBundle,
    p: Mapping[str, Any],
    asked: Mapping[str, Any],
    cp: VerifiedCheckpoint,
    *,
    disclosed: bool,
) -> None:
    """The evidence is about the claim's agent and ``pact.outcome``, built at the verdict's
    checkpoint, and (bodies disclosed) proves the signed figures, or for an unknown verdict
    the erasure it rests on."""
    if not vb.claims or any(
        c.statement.get("agent") != asked["agent"] or c.statement.get("kind") != "pact.outcome"
        for c in vb.claims
    ):
        raise ProofError("the evidence is about another agent or kind", check="oracle.evidence")
    if vb.checkpoint.size != cp.size:
        raise ProofError("the evidence is not built at the verdict's checkpoint", check="oracle.evidence")
    if not disclosed:
        return
    if p["verdict"] == "unknown":
        # Erased outcomes: no figure over bodies can be proven, so the evidence is the
        # record count, and it must prove the erasure the verdict rests on.
        if not vb.erased:
            raise ProofError("an unknown verdict's evidence proves no erased record", check="oracle.evidence")
        return
    figures = {
        c.statement["predicate"]: c.recomputed for c in vb.claims if c.statement.get("where") == p["where"]
    }
    proven = {"count": figures.get("count")} | (
        {"mean_quality": figures["mean"]} if "mean" in figures else {}
    )
    if proven != p["actual"]:
        raise ProofError("the evidence does not prove the signed figures", check="oracle.evidence")


#: How each query's JSON answer is read back (the route writes the protocol's values).
_ANSWERS: dict[type[Query[Any]], Callable[[Any], Any]] = {
    RecallQuery: lambda a: Recalled.of(
        context=_text(a["context"]),
        hot=a["hot"],
        ranked=a["ranked"],
        notes=a["notes"],
        as_of_size=a["as_of_size"],
    ),
    ItemsQuery: _page,
    ItemQuery: item_proof_of,
    SessionsQuery: lambda a: [SessionRow.of(s) for s in a],
    SessionQuery: SessionRow.of,
    MeshesQuery: lambda a: [MeshRow.of(m) for m in a],
    HotBlockQuery: _text,
    CompactQuery: lambda a: [_receipt(r) for r in a],
    EntryQuery: _entry_proof,
}
