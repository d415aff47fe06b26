"""One agent's memory behind one interface, wherever the log is.

:class:`AgentMemory` is what the MCP server, the harness hooks and the CLI's agent-side
commands call: the same operations with the same plain-JSON answers whether the log is an
embedded database in this process (``ledger.local.LocalAgentMemory``) or an Engram service
over HTTP (:class:`RemoteAgentMemory`, no database driver loaded). Every answer that carries
a proof has been verified against the log's key before it is returned.

Answers are the frozen values of :mod:`engram.protocol.answers` (``to_json()`` gives the
plain JSON the MCP tools and the CLI print):

* ``write``/``record``/``supersede``: :class:`Written`; ``turn``/``erase``: :class:`Appended`;
  ``close_session``: :class:`Closed`
* ``recall``: :class:`Recalled` (rows: :class:`RecallRow`)
* ``item``: :class:`Shown`; ``prove``: :class:`Proven`
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from engram.client.http import HttpTransport, RemoteMemory
from engram.client.sdk import Agent
from engram.protocol.answers import ROW_FIELDS, Appended, Closed, Proven, Recalled, RecallRow, Shown, Written
from engram.protocol.entries import parse_entry_lines
from engram.protocol.errors import ConfigError, NotFoundError, ProofError
from engram.protocol.recall_block import hot_part
from verifier.event import Leaf
from verifier.merkle import verify_inclusion
from verifier.note import VerifierKey, b64decode_strict, b64encode, verify_checkpoint
from verifier.state import default_state_dir

__all__ = ["ROW_FIELDS", "AgentMemory", "RemoteAgentMemory", "connect_remote", "recall_rows", "verify_proof"]


class AgentMemory(Protocol):
    """One agent's memory (see the module docstring for the shape of each answer)."""

    @property
    def agent_id(self) -> str: ...

    def open_session(self, *, title: str | None = None, session: str | None = None) -> str: ...

    def turn(self, session: str, role: str, content: str) -> Appended: ...

    def close_session(self, session: str, *, summary: str | None = None) -> Closed: ...

    def session_turns(self, session: str) -> int | None: ...

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
    ) -> Written: ...

    def record(self, kind: str, body: Mapping[str, Any]) -> Written: ...

    def supersede(self, ref: str, *, content: str, reason: str) -> Written: ...

    def erase(self, index: int, *, reason: str) -> Appended: ...

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
    ) -> Recalled: ...

    def items(self, *, tier: str | None = None, status: str = "active") -> list[dict[str, Any]]: ...

    def item(self, ref: str) -> Shown: ...

    def prove(self, index: int) -> Proven: ...

    def mint_token(self, *, audience: str, kinds: Sequence[str], expires: int) -> str: ...

    def hot_block(self, session: str | None = None, scopes: Sequence[str] | None = None) -> str: ...

    def log_key(self) -> str: ...

    def checkpoint(self) -> str: ...


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


class RemoteAgentMemory:
    """:class:`AgentMemory` over an Engram service (:class:`RemoteMemory` underneath)."""

    def __init__(self, remote: RemoteMemory, log_vkey: str) -> None:
        self.remote = remote
        self._vkey = log_vkey

    @property
    def agent_id(self) -> str:
        return self.remote.agent_id

    # -- sessions -----------------------------------------------------------------------

    def open_session(self, *, title: str | None = None, session: str | None = None) -> str:
        return self.remote.open_session(title=title, session=session)

    def turn(self, session: str, role: str, content: str) -> Appended:
        return Appended(index=self.remote.turn(session, role, content).index)

    def close_session(self, session: str, *, summary: str | None = None) -> Closed:
        out = self.remote.close_session(session, summary=summary)
        policy = out["policy"]
        return Closed(
            closed=out["closed"].index,
            distilled=next((r.index for r in policy if r.kind == "memory.distilled"), None),
            entries=out["entries"],
            decisions=sum(1 for r in policy if r.kind != "memory.distilled"),
        )

    def session_turns(self, session: str) -> int | None:
        try:
            return int(self.remote.session(session)["turns"])
        except NotFoundError:
            return None

    # -- writes -------------------------------------------------------------------------

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
    ) -> Written:
        receipt, ref = self.remote.write(
            category=category,
            content=content,
            tags=list(tags),
            confidence=confidence,
            session=session,
            tier=tier,
            evidence=evidence,
            provenance=[dict(p) for p in provenance],
        )
        return Written(
            index=receipt.index, ref=ref, duplicate=ref is not None and ref != f"{receipt.index}.0"
        )

    def record(self, kind: str, body: Mapping[str, Any]) -> Written:
        r = self.remote.record(kind, body)
        return Written(index=r.index, ref=f"{r.index}.0", duplicate=False)

    def supersede(self, ref: str, *, content: str, reason: str) -> Written:
        r = self.remote.supersede(ref, content=content, reason=reason)
        return Written(index=r.index, ref=f"{r.index}.0", duplicate=False)

    def erase(self, index: int, *, reason: str) -> Appended:
        return Appended(index=self.remote.erase(index, reason=reason).index)

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
    ) -> Recalled:
        out = self.remote.recall(
            query,
            include_cold=include_cold,
            include_archived=include_archived,
            limit=limit,
            budget_tokens=budget_tokens,
            session=session,
            scopes=scopes,
        )
        return Recalled.of(
            context=out["context"],
            hot=out.get("hot", []),
            ranked=out.get("ranked", []),
            notes=out.get("notes", []),
            as_of_size=out.get("as_of_size"),
        )

    def items(self, *, tier: str | None = None, status: str = "active") -> list[dict[str, Any]]:
        return self.remote.items(tier=tier, status=status)

    def item(self, ref: str) -> Shown:
        out = self.remote.item(ref)  # verified: leaf, body, inclusion, checkpoint signature
        inc = out["inclusion"]
        proof = verify_proof(
            self.remote.agent.log_key,
            index=int(out["item"]["index"]),
            leaf=b64decode_strict(out["leaf"], check="proof.encoding"),
            checkpoint=str(inc["checkpoint"]).encode("utf-8"),
            proof=[b64decode_strict(h, check="proof.encoding") for h in inc["proof"]],
        )
        return Shown(item=out["item"], proof=proof)

    def prove(self, index: int) -> Proven:
        t = self.remote.transport
        inc = t.request("GET", "/v1/proofs/inclusion", params={"index": index}).json()
        leaves = parse_entry_lines(
            t.request("GET", "/v1/log/entries", params={"start": index, "end": index + 1}).content,
            start=index,
            max_entries=1,
        )
        if not leaves:
            raise NotFoundError(f"the log has no entry {index}", check="proof.index")
        out = verify_proof(
            self.remote.agent.log_key,
            index=index,
            leaf=leaves[0],
            checkpoint=str(inc["checkpoint"]).encode("utf-8"),
            proof=[b64decode_strict(h, check="proof.encoding") for h in inc["proof"]],
        )
        self.remote.agent.observe(verify_checkpoint(out.checkpoint.encode(), self.remote.agent.log_key))
        return out

    def mint_token(self, *, audience: str, kinds: Sequence[str], expires: int) -> str:
        return self.remote.mint_token(audience=audience, kinds=kinds, expires=expires)

    def hot_block(self, session: str | None = None, scopes: Sequence[str] | None = None) -> str:
        out = self.remote.recall("", session=session, limit=1, scopes=scopes)
        # The HOT section alone, as the embedded log gives it (issue 26: the service's block
        # carried one more memory under a "recalled for this query" heading, with no query).
        return hot_part(str(out["context"]))

    def log_key(self) -> str:
        return self._vkey

    def checkpoint(self) -> str:
        note = self.remote.transport.checkpoint()
        self.remote.agent.observe(verify_checkpoint(note, self.remote.agent.log_key))
        return note.decode("utf-8")


def _pinned_key(url: str) -> Path | None:
    state = default_state_dir()
    if state is None:
        return None
    return Path(state) / "log-keys" / hashlib.sha256(url.encode("utf-8")).hexdigest()


def pin_file(url: str) -> Path | None:
    """Where the log key pinned for ``url`` is kept (None without a verifier state dir)."""
    return _pinned_key(url)


def reset_pin(url: str) -> Path | None:
    """Forget the log key pinned for ``url`` (``engram log pin --reset``); the next
    connection pins the key the service serves then. Returns the file removed, if any."""
    pin = _pinned_key(url)
    if pin is None or not pin.is_file():
        return None
    pin.unlink()
    return pin


def resolve_log_key(url: str, log_key: str | None, transport: HttpTransport) -> str:
    """The log's verifier key: given (``--log-key`` / ``ENGRAM_LOG_KEY``), else the one
    pinned for this URL on first use (in the verifier state directory), else fetched from
    the service and pinned. The service's key is read every time and compared: a service
    whose key differs from the given or pinned one is refused with one message naming both
    keys, the pin and how to re-pin (issue 26: it read as "the request signature does not
    verify" on every request)."""
    served = transport.request("GET", "/v1/log/key").text.strip()
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
    if pin is not None and pin.is_file():
        pinned = pin.read_text(encoding="utf-8").strip()
        if served != pinned:
            raise ConfigError(
                f"the service at {url} serves the log key {served!r}, but {pinned!r} was pinned for "
                f"that URL on first use ({pin}): another log is served there now. If that is expected "
                f"(a new log), re-pin with `engram log pin --reset --server {url}`; otherwise do not "
                "trust this service"
            )
        return pinned
    VerifierKey.parse(served)
    if pin is not None:
        pin.parent.mkdir(parents=True, exist_ok=True)
        tmp = pin.with_suffix(".tmp")
        tmp.write_text(served + "\n", encoding="utf-8")
        os.replace(tmp, pin)
    return served


def connect_remote(
    url: str,
    key_file: Path,
    *,
    log_key: str | None = None,
    lite: bool = True,
    timeout_s: float = 30.0,
) -> RemoteAgentMemory:
    """The agent of ``key_file`` on the Engram service at ``url``. ``lite`` uses the standard
    library's HTTP client (fast start-up, for hooks and the CLI) instead of httpx."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--server / ENGRAM_URL must be an http(s) URL, not {url!r}")
    if not key_file.is_file():
        raise ConfigError(f"no agent key file at {key_file} (--key-file / ENGRAM_KEY_FILE)")
    http: Any = None
    if lite:
        from engram.client.litehttp import LiteHttp

        http = LiteHttp(timeout_s=timeout_s)
    transport = HttpTransport(url, http=http, timeout_s=timeout_s)
    vkey = resolve_log_key(url, log_key, transport)
    agent = Agent.load(key_file, log_vkey=vkey, transport=transport)
    return RemoteAgentMemory(RemoteMemory(agent, transport), vkey)
