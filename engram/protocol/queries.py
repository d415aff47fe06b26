"""The questions an agent asks of its memory, as frozen values client and service share.

A recall's options travel as one :class:`RecallQuery` from the caller (SDK, CLI, MCP, HTTP)
to the service's recall stages, so a new option is one field here and the stage that reads
it, not a keyword spelled in every signature on the way. :meth:`RecallQuery.of` is the
first stage: it parses and bounds what a caller sent, and refuses it with a typed error
naming the check before anything is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engram.protocol.errors import MalformedError, RejectedEventError
from engram.protocol.schemas import MAX_QUERY_CHARS
from engram.protocol.scopes import parse_scopes

__all__ = ["MAX_MESHES", "MAX_RECALL_LIMIT", "RECALL_SOURCES", "RecallQuery"]

MAX_RECALL_LIMIT = 100
MAX_MESHES = 64
RECALL_SOURCES = ("all", "memories", "records")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallQuery:
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
            isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0
        ):
            raise RejectedEventError("budget_tokens must be a whole number >= 0", check="request.budget")
        if meshes is not None:
            if isinstance(meshes, str) or len(meshes) > MAX_MESHES:
                raise RejectedEventError(
                    f"meshes is a list of at most {MAX_MESHES} names", check="request.meshes"
                )
            meshes = tuple(meshes)
        try:
            wanted = parse_scopes(scopes)
        except MalformedError as e:
            raise RejectedEventError(str(e), check="request.scopes") from e
        return cls(
            text=text,
            include_cold=bool(include_cold),
            include_archived=bool(include_archived),
            limit=limit,
            budget_tokens=budget_tokens,
            session=session,
            sources=sources,
            scopes=wanted,
            meshes=meshes,
        )
