"""The questions an agent asks of its memory, as frozen values client and service share.

The memory port is narrow (``MemoryTransport``: ``submit(events)`` and ``ask(query)``):
every read an agent makes of its memory travels as one value of this module, from the
caller (SDK, CLI, MCP) through either transport (in process, or ``POST
/v1/agents/{agent}/ask``) to the service's handler (``ledger/memory/asking.py``). So a new
recall option is one field here and the stage that reads it, and a new query is one value
here and its handler, not a keyword spelled in every signature on the way.

Each value's ``of`` is the first stage: it parses and bounds what a caller sent, and
refuses it with a typed error naming the ``request.*`` check before anything is read.
:func:`parse_query` reads a value back from its JSON (:meth:`Query.to_json`), the same
checks, for the HTTP route.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from engram.protocol.answers import EntryProof, ItemPage, ItemProof, MeshRow, Recalled, SessionRow
from engram.protocol.errors import MalformedError, RejectedEventError
from engram.protocol.schemas import MAX_QUERY_CHARS, MESH_PATTERN, SESSION_PATTERN, parse_ref
from engram.protocol.scopes import parse_scopes
from engram.protocol.wire import Receipt

__all__ = [
    "ITEM_STATUSES",
    "ITEM_TIERS",
    "MAX_BUDGET_TOKENS",
    "MAX_ITEMS_PAGE",
    "MAX_MESHES",
    "MAX_RECALL_LIMIT",
    "QUERIES",
    "RECALL_SOURCES",
    "CheckpointQuery",
    "CompactQuery",
    "EntryQuery",
    "HotBlockQuery",
    "ItemQuery",
    "ItemsQuery",
    "MeshProofQuery",
    "MeshesQuery",
    "Query",
    "RecallQuery",
    "SessionQuery",
    "SessionsQuery",
    "parse_query",
]

MAX_RECALL_LIMIT = 100
MAX_MESHES = 64
MAX_BUDGET_TOKENS = 100_000
RECALL_SOURCES = ("all", "memories", "records")
MAX_ITEMS_PAGE = 1000
ITEM_TIERS = ("HOT", "WARM", "COLD", "RECORD")
ITEM_STATUSES = ("active", "superseded", "archived", "erased", "all")
#: The longest mesh id: a creator (64) "/" a name (32).
_MAX_MESH_ID = 97
#: The most members a query's JSON may carry (the widest value's fields, and ``ask``).
_MAX_MEMBERS = 16

A = TypeVar("A")


class Query(Generic[A]):
    """A question with an answer of type ``A``; ``name`` is what it is called on the wire."""

    __slots__ = ()
    name: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """``{"ask": name, field: value...}``, plain JSON (what :func:`parse_query` reads)."""
        out: dict[str, Any] = {"ask": self.name}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every query is a dataclass
            value = getattr(self, f.name)
            out[f.name] = (
                sorted(value)
                if isinstance(value, frozenset)
                else (list(value) if isinstance(value, tuple) else value)
            )
        return out


def _session(value: object, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not SESSION_PATTERN.fullmatch(value):
        raise RejectedEventError("a session id is [A-Za-z0-9][A-Za-z0-9._-]{0,63}", check="request.session")
    return value


def _ref(value: object) -> str:
    if not isinstance(value, str):
        raise RejectedEventError("an item reference is <index>.<n>", check="request.ref")
    try:
        parse_ref(value)
    except RejectedEventError as e:
        raise RejectedEventError(str(e), check="request.ref") from None
    return value


def _mesh(value: object) -> str:
    if not isinstance(value, str) or not MESH_PATTERN.fullmatch(value):
        raise RejectedEventError("a mesh id is <creator>/<name>", check="request.mesh")
    return value


def _whole(value: object, check: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RejectedEventError(f"{check.removeprefix('request.')} must be {low}-{high}", check=check)
    return value


def _scopes(scopes: object) -> frozenset[str] | None:
    if scopes is not None and (isinstance(scopes, str) or not isinstance(scopes, Sequence)):
        raise RejectedEventError("scopes is a list of scope names", check="request.scopes")
    try:
        return parse_scopes(scopes)
    except (MalformedError, TypeError, AttributeError) as e:
        raise RejectedEventError(str(e), check="request.scopes") from e


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallQuery(Query[Recalled]):
    """One recall: the text ranked against, and every option that shapes the answer.

    ``scopes`` None searches every scope; ``meshes`` None reads every mesh the agent is an
    active member of, empty reads none. ``budget_tokens`` None takes the service's default.
    """

    text: str
    include_cold: bool = False
    include_archived: bool = False
    limit: int = 10
    budget_tokens: int | None = None
    session: str | None = None
    sources: str = "all"
    scopes: frozenset[str] | None = None
    meshes: tuple[str, ...] | None = None

    name: ClassVar[str] = "recall"

    @classmethod
    def of(
        cls,
        text: str,
        *,
        include_cold: bool = False,
        include_archived: bool = False,
        limit: int = 10,
        budget_tokens: int | None = None,
        session: str | None = None,
        sources: str = "all",
        scopes: Sequence[str] | None = None,
        meshes: Sequence[str] | None = None,
    ) -> RecallQuery:
        """Parse and bound a recall as a caller sent it (RejectedEventError naming the check)."""
        if not isinstance(text, str):
            raise RejectedEventError("a recall query is text", check="request.query")
        if len(text) > MAX_QUERY_CHARS:
            raise RejectedEventError(
                f"a recall query is at most {MAX_QUERY_CHARS} characters", check="request.query"
            )
        if sources not in RECALL_SOURCES:
            raise RejectedEventError("sources must be all, memories or records", check="request.sources")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECALL_LIMIT:
            raise RejectedEventError(f"limit must be 1-{MAX_RECALL_LIMIT}", check="request.limit")
        if budget_tokens is not None and (
            isinstance(budget_tokens, bool)
            or not isinstance(budget_tokens, int)
            or not 0 <= budget_tokens <= MAX_BUDGET_TOKENS
        ):
            raise RejectedEventError(
                f"budget_tokens must be a whole number 0-{MAX_BUDGET_TOKENS}", check="request.budget"
            )
        if meshes is not None:
            if isinstance(meshes, str) or not isinstance(meshes, Sequence) or len(meshes) > MAX_MESHES:
                raise RejectedEventError(
                    f"meshes is a list of at most {MAX_MESHES} names", check="request.meshes"
                )
            if not all(
                isinstance(m, str) and len(m) <= _MAX_MESH_ID and MESH_PATTERN.fullmatch(m) for m in meshes
            ):
                raise RejectedEventError(
                    f"a mesh id is <creator>/<name>, at most {_MAX_MESH_ID} characters",
                    check="request.meshes",
                )
            meshes = tuple(meshes)
        wanted = _scopes(scopes)
        session = _session(session)
        return cls(
            text=text,
            include_cold=_flag(include_cold, "request.include_cold"),
            include_archived=_flag(include_archived, "request.include_archived"),
            limit=limit,
            budget_tokens=budget_tokens,
            session=session,
            sources=sources,
            scopes=wanted,
            meshes=meshes,
        )


def _flag(value: object, check: str) -> bool:
    if not isinstance(value, bool):
        raise RejectedEventError(f"{check.removeprefix('request.')} is true or false", check=check)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemsQuery(Query[ItemPage]):
    """One page of the agent's items of ``tier`` (None: every tier but RECORD's session
    turns) and ``status`` (``all``: any), in log order, after the item ``after``."""

    tier: str | None = None
    status: str = "active"
    after: str | None = None
    limit: int = MAX_ITEMS_PAGE

    name: ClassVar[str] = "items"

    @classmethod
    def of(
        cls,
        *,
        tier: str | None = None,
        status: str = "active",
        after: str | None = None,
        limit: int = MAX_ITEMS_PAGE,
    ) -> ItemsQuery:
        if tier is not None and tier not in ITEM_TIERS:
            raise RejectedEventError("tier must be HOT, WARM, COLD or RECORD", check="request.tier")
        if status not in ITEM_STATUSES:
            raise RejectedEventError(
                "status must be active, superseded, archived, erased or all", check="request.status"
            )
        return cls(
            tier=tier,
            status=status,
            after=None if after is None else _ref(after),
            limit=_whole(limit, "request.limit", 1, MAX_ITEMS_PAGE),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemQuery(Query[ItemProof]):
    """One item with what proves it: its leaf, inclusion proof, salt and body."""

    ref: str

    name: ClassVar[str] = "item"

    @classmethod
    def of(cls, *, ref: str) -> ItemQuery:
        return cls(ref=_ref(ref))


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionsQuery(Query[list[SessionRow]]):
    """Every session of the agent, in id order."""

    name: ClassVar[str] = "sessions"

    @classmethod
    def of(cls) -> SessionsQuery:
        return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionQuery(Query[SessionRow]):
    """One session's state (NotFoundError when the agent has no such session)."""

    session: str

    name: ClassVar[str] = "session"

    @classmethod
    def of(cls, *, session: str) -> SessionQuery:
        return cls(session=str(_session(session, required=True)))


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshesQuery(Query[list[MeshRow]]):
    """The Memory Meshes the agent is an active member of, folded from the log."""

    name: ClassVar[str] = "meshes"

    @classmethod
    def of(cls) -> MeshesQuery:
        return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshProofQuery(Query[bytes]):
    """A ``mesh_read`` bundle proving memory ``ref`` was shared with the agent through ``mesh``."""

    mesh: str
    ref: str

    name: ClassVar[str] = "mesh_proof"

    @classmethod
    def of(cls, *, mesh: str, ref: str) -> MeshProofQuery:
        return cls(mesh=_mesh(mesh), ref=_ref(ref))


@dataclass(frozen=True, slots=True, kw_only=True)
class HotBlockQuery(Query[str]):
    """The closed HOT section alone (no use recorded: a hook injects it at every start)."""

    session: str | None = None
    scopes: frozenset[str] | None = None

    name: ClassVar[str] = "hot_block"

    @classmethod
    def of(cls, *, session: str | None = None, scopes: Sequence[str] | None = None) -> HotBlockQuery:
        return cls(session=_session(session), scopes=_scopes(scopes))


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactQuery(Query[list[Receipt]]):
    """Apply the time-based rules now; the answer is the policy-signed decisions (unverified)."""

    name: ClassVar[str] = "compact"

    @classmethod
    def of(cls) -> CompactQuery:
        return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointQuery(Query[bytes]):
    """The log's latest (cosigned) checkpoint note, unverified."""

    name: ClassVar[str] = "checkpoint"

    @classmethod
    def of(cls) -> CheckpointQuery:
        return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryQuery(Query[EntryProof]):
    """Entry ``index``'s leaf and its inclusion proof in the latest checkpoint, unverified."""

    index: int

    name: ClassVar[str] = "entry"

    @classmethod
    def of(cls, *, index: int) -> EntryQuery:
        return cls(index=_whole(index, "request.index", 0, 2**63 - 1))


#: Every query by its wire name (``{"ask": name}``).
QUERIES: dict[str, type[Query[Any]]] = {
    q.name: q
    for q in (
        RecallQuery,
        ItemsQuery,
        ItemQuery,
        SessionsQuery,
        SessionQuery,
        MeshesQuery,
        MeshProofQuery,
        HotBlockQuery,
        CompactQuery,
        CheckpointQuery,
        EntryQuery,
    )
}


def parse_query(data: object) -> Query[Any]:
    """A query from its JSON (:meth:`Query.to_json`), bounded and checked by its ``of``:
    an object naming a known query in ``ask``, with only that query's members
    (RejectedEventError naming the check: ``request.ask``, ``request.members``, then the
    value's own)."""
    if not isinstance(data, Mapping) or len(data) > _MAX_MEMBERS:
        raise RejectedEventError(
            f"a query is an object of at most {_MAX_MEMBERS} members", check="request.members"
        )
    name = data.get("ask")
    cls = QUERIES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise RejectedEventError(f"ask must name a query: {', '.join(sorted(QUERIES))}", check="request.ask")
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # a dataclass
    members = {k: v for k, v in data.items() if k != "ask"}
    unknown = sorted(str(k)[:40] for k in members if k not in known)
    if unknown:
        raise RejectedEventError(f"{cls.name} takes no {', '.join(unknown)}", check="request.members")
    try:
        query: Query[Any] = cls.of(**members)  # type: ignore[attr-defined]  # every query has its of
    except TypeError:  # a required member is missing
        raise RejectedEventError(f"{cls.name} lacks a required member", check="request.members") from None
    return query
