"""The web UI's pages (``/ui``): server-rendered HTML (Jinja2 templates in ``templates/``)
and a little JavaScript (``static/ui.js``) that verifies in the browser with the TypeScript
verifier built into ``static/engram-verify.js``.

Read-only: no page writes to the log (the recall playground recalls without recording the
use). Every query is bounded (ledger.explore). Public pages show what the log already makes
public (leaves, proofs, key histories, the trust oracle's figures); bodies and memory are
shown only to the agent's owner, in a session opened with the agent's key (api/ui/session).

The two forms that act are POSTs from this origin only (:func:`_same_origin`, beside the
session cookie's ``SameSite=Strict``): "Sign out", which revokes the session for every
worker, and the recall playground, whose question travels in the request body so that no
access log, proxy log or browser history keeps it (as a GET query it
landed in the service's access log); the question is neither logged nor stored.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, cast
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from api.deps import Services
from api.schemas import AGENT, KIND, REF
from api.ui import plots
from api.ui.session import COOKIE, SESSION_S, OwnerSession, OwnerSessions
from engram.protocol.errors import EngramError
from engram.protocol.longtext import recall_query
from engram.protocol.schemas import MAX_TURN_CHARS, parse_ref
from ledger import explore
from ledger.memory.state import Item

__all__ = ["error_page", "router", "sessions_of"]

HERE = Path(__file__).parent
_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)

#: What a page may load and where it may connect: only this origin (the bundle verifier may
#: also fetch a bundle from a URL the user pastes).
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src {connect}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_TIERS = ("HOT", "WARM", "COLD", "archived", "past")
_PAGE = 50
#: The largest form body read (a playground question is bounded by the turn limit).
_MAX_FORM_BYTES = 4 * MAX_TURN_CHARS + 1024

router = APIRouter(prefix="/ui", include_in_schema=False)


def _ts(us: int | None) -> str:
    if not us:
        return ""
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _day(us: int | None) -> str:
    return "" if not us else datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d")


_env.filters["ts"] = _ts
_env.filters["day"] = _day
_env.filters["b64"] = lambda b: base64.b64encode(b).decode("ascii")
_env.filters["hex"] = lambda b: b.hex()


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


def sessions_of(request: Request) -> OwnerSessions:
    """The app's owner sessions (made on first use: they need the ledger the lifespan opens)."""
    state = request.app.state
    found: OwnerSessions | None = getattr(state, "ui_sessions", None)
    if found is None or found.ledger is not services(request).ledger:
        found = OwnerSessions(services(request).ledger)
        state.ui_sessions = found
    return found


def _owner(request: Request) -> OwnerSession | None:
    return sessions_of(request).check(request.cookies.get(COOKIE))


def _page(
    request: Request,
    template: str,
    status: int = 200,
    *,
    connect: str = "'self'",
    look_up_owner: bool = True,
    **ctx: Any,
) -> HTMLResponse:
    owner = ctx.pop("owner", None) or (_owner(request) if look_up_owner else None)
    html = _env.get_template(template).render(request=request, owner=owner, **ctx)
    return HTMLResponse(
        html,
        status_code=status,
        headers={
            "Content-Security-Policy": _CSP.format(connect=connect),
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


def _fields(view: Any) -> dict[str, Any]:
    """A frozen view's fields by name, for a template (shallow: rows stay typed values)."""
    return {f.name: getattr(view, f.name) for f in dataclasses.fields(view)}


def _error(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    return _page(request, "error.html", status, title=title, message=message)


def error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    """An error page for a UI route that failed before its handler ran (a bad query value, an
    unknown page): HTML, not the API's problem JSON. It reads nothing (no owner session: the
    database may be what failed)."""
    return _page(request, "error.html", status, look_up_owner=False, title=title, message=message)


def _percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage to a tenth (``2, 3`` -> ``66.7%``), computed
    from the counts; 100% and 0% only for all and none (``>99.9%``, ``<0.1%`` otherwise)."""
    exact = Decimal(part) * 100 / Decimal(whole)
    pct = exact.quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN)
    if pct == 100 and part < whole:
        return ">99.9%"
    if pct == 0 and part > 0:
        return "<0.1%"
    return f"{pct.normalize():f}%"


_env.filters["percent"] = _percent


def _same_origin(request: Request) -> bool:
    """Whether a POST comes from a page of this origin: the browser's ``Sec-Fetch-Site``
    says ``same-origin``, or, from a browser that sends none, ``Origin`` names this host.
    Nothing else passes (no header at all, ``Origin: null``, another site): the session
    cookie is ``SameSite=Strict`` too, so a cross-site form carries no session either."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if not origin or origin == "null" or not host:
        return False
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def _cross_site(request: Request) -> HTMLResponse:
    return _error(
        request,
        403,
        "Refused: not a form of this site",
        "This action is accepted only from this site's own pages [ui.origin]",
    )


async def _form(request: Request) -> dict[str, str] | None:
    """An ``application/x-www-form-urlencoded`` body of at most :data:`_MAX_FORM_BYTES`
    (read no further), one value per field; None if it is not one."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != (
        "application/x-www-form-urlencoded"
    ):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("ascii"), keep_blank_values=True, max_num_fields=8, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None
    if any(len(v) != 1 for v in fields.values()):
        return None
    return {k: v[0] for k, v in fields.items()}


# -- the explorer --------------------------------------------------------------------------


@router.get("")
@router.get("/")
async def home(request: Request) -> HTMLResponse:
    svc = services(request)

    view = await run_in_threadpool(explore.home_view, svc.ledger)
    chart = plots.time_chart("Log size over time", [(t, float(s)) for t, s in view.points], "entries")
    return _page(
        request,
        "home.html",
        origin=svc.ledger.origin,
        vkey=svc.ledger.vkey,
        note=view.cp.note.decode("utf-8"),
        chart=chart,
        **_fields(view),
    )


@router.get("/entries")
async def entries(
    request: Request,
    agent: Annotated[str | None, Query(pattern=AGENT)] = None,
    kind: Annotated[str | None, Query(pattern=KIND)] = None,
    before: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    limit: Annotated[int, Query(ge=1, le=explore.MAX_PAGE)] = _PAGE,
) -> HTMLResponse:
    svc = services(request)
    size = svc.ledger.size()
    page = await run_in_threadpool(
        lambda: explore.entries_page(svc.ledger, size, agent=agent, kind=kind, before=before, limit=limit)
    )
    return _page(request, "entries.html", page=page, agent=agent, kind=kind, before=before, limit=limit)


@router.get("/entry")
async def entry_at(index: Annotated[int, Query(ge=0, le=2**53)]) -> Response:
    """The "entry at index" form's target (a form cannot put a value in the path)."""
    return RedirectResponse(f"/ui/entries/{index}", status_code=303)


@router.get("/entries/{index}")
async def entry(request: Request, index: Annotated[int, PathParam(ge=0, le=2**53)]) -> HTMLResponse:
    svc = services(request)
    owner = _owner(request)

    view = await run_in_threadpool(
        lambda: explore.entry_view(svc.ledger, index, owner=None if owner is None else owner.agent)
    )
    if view is None:
        return _error(request, 404, "No such entry", f"entry {index} is not in the latest checkpoint")
    parsed = json.loads(view.leaf)
    return _page(
        request,
        "entry.html",
        owner=owner,
        leaf_b64=base64.b64encode(view.leaf).decode("ascii"),
        leaf_pretty=json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=True),
        sig=parsed.get("sig", ""),
        event=parsed.get("event", {}),
        origin=svc.ledger.origin,
        **_fields(view),
    )


@router.get("/agents")
async def agents(
    request: Request,
    q: Annotated[str, Query(max_length=64, pattern=r"^[A-Za-z0-9._-]*$")] = "",
    after: Annotated[str | None, Query(pattern=AGENT)] = None,
) -> HTMLResponse:
    svc = services(request)
    q = q.lower()
    rows, nxt = await run_in_threadpool(lambda: explore.agents_page(svc.ledger, prefix=q, after=after))
    if len(rows) == 1 and q and rows[0].agent == q and after is None:
        return RedirectResponse(f"/ui/agents/{q}", status_code=303)  # type: ignore[return-value]
    return _page(request, "agents.html", rows=rows, next_after=nxt, q=q)


@router.get("/agents/{agent}")
async def agent_page(request: Request, agent: Annotated[str, PathParam(pattern=AGENT)]) -> HTMLResponse:
    svc = services(request)

    view = await run_in_threadpool(explore.agent_view, svc.ledger, agent)
    if view is None:
        return _error(request, 404, "No such agent", f"no agent {agent} in this log")
    s = view.series
    months = [m for m, *_ in s.quality_by_month]
    quality = (
        plots.line_chart(
            "Quality by month",
            months,
            [
                ("pact quality", [q for _, q, _, _ in s.quality_by_month]),
                ("eval score", [e for _, _, e, _ in s.quality_by_month]),
            ],
            y_max=100,
        )
        if months
        else ""
    )
    weeks = [w for w, *_ in s.outcomes_by_week]
    outcomes = (
        plots.bar_chart(
            "Outcomes by week",
            weeks,
            [
                (
                    "pact",
                    [
                        ("fulfilled", [f for _, f, _, _, _ in s.outcomes_by_week]),
                        ("violated", [v for _, _, v, _, _ in s.outcomes_by_week]),
                    ],
                ),
                (
                    "eval",
                    [
                        ("eval pass", [p for _, _, _, p, _ in s.outcomes_by_week]),
                        ("eval fail", [f for _, _, _, _, f in s.outcomes_by_week]),
                    ],
                ),
            ],
        )
        if weeks
        else ""
    )
    return _page(
        request,
        "agent.html",
        agent=agent,
        quality_chart=quality,
        outcomes_chart=outcomes,
        vkey=svc.ledger.vkey,
        **_fields(view),
    )


@router.get("/verify")
async def verify(request: Request) -> HTMLResponse:
    svc = services(request)
    # The bundle verifier may fetch a bundle from a URL the user pastes: any origin.
    return _page(request, "verify.html", connect="*", vkey=svc.ledger.vkey)


# -- the owner's view ------------------------------------------------------------------------


@router.get("/login")
async def login(request: Request, ticket: Annotated[str, Query(max_length=1024)] = "") -> Response:
    """Trade a one-time ticket (``engram ui``) for a session cookie, then show the memory."""
    try:
        cookie, session = await run_in_threadpool(sessions_of(request).redeem, ticket)
    except EngramError as e:
        return _error(
            request,
            401,
            "This link does not open a session",
            f"{e} [{getattr(e, 'check', type(e).__name__)}]",
        )
    resp = RedirectResponse(f"/ui/agents/{session.agent}/memory", status_code=303)
    resp.set_cookie(
        COOKIE,
        cookie,
        max_age=SESSION_S,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Sign out: the session is revoked for every worker (api/ui/session), then the cookie
    dropped. If the database cannot record it, the page says the session still opens the
    view until it expires (the cookie is dropped from this browser either way)."""
    if not _same_origin(request):
        return _cross_site(request)
    try:
        await run_in_threadpool(sessions_of(request).revoke, request.cookies.get(COOKIE))
    except EngramError as e:
        resp: Response = _error(
            request,
            503,
            "Not signed out on the service",
            f"The service could not record that this session ended ({e}); a copy of the cookie "
            "still opens the view until it expires. This browser's cookie is deleted.",
        )
    else:
        resp = RedirectResponse("/ui", status_code=303)
    resp.delete_cookie(COOKIE, path="/ui")
    return resp


@router.get("/me")
async def me(request: Request) -> Response:
    owner = _owner(request)
    if owner is None:
        return _error(request, 401, "Your agent's memory", "")
    return RedirectResponse(f"/ui/agents/{owner.agent}/memory", status_code=303)


Tier = Literal["HOT", "WARM", "COLD", "archived", "past"]


@router.get("/agents/{agent}/memory")
async def memory(
    request: Request,
    agent: Annotated[str, PathParam(pattern=AGENT)],
    tier: Annotated[Tier, Query()] = "HOT",
    after: Annotated[str | None, Query(pattern=REF)] = None,
) -> HTMLResponse:
    """The owner's view (a question for the playground is POSTed: :func:`memory_recall`)."""
    return await _memory_view(request, agent, tier, after, "")


@router.post("/agents/{agent}/memory")
async def memory_recall(request: Request, agent: Annotated[str, PathParam(pattern=AGENT)]) -> HTMLResponse:
    """The recall playground: the question in the form body, from this site's pages only."""
    if not _same_origin(request):
        return _cross_site(request)
    form = await _form(request)
    tier = (form or {}).get("tier", "HOT")
    q = (form or {}).get("q", "")
    if form is None or tier not in _TIERS or len(q) > MAX_TURN_CHARS:
        return _error(
            request, 400, "Recall refused the question", "the form is not the playground's [ui.form]"
        )
    return await _memory_view(request, agent, cast(Tier, tier), None, q)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _MemoryView:
    """The owner's memory page: a page of items of one tier, the counts per tier, and the
    playground's rendered recall (None: no question)."""

    items: list[Item]
    more: bool
    counts: dict[str, int]
    recall: str | None
    size: int


async def _memory_view(request: Request, agent: str, tier: Tier, after: str | None, q: str) -> HTMLResponse:
    owner = _owner(request)
    if owner is None:
        return _error(
            request,
            401,
            "This view needs the agent's authority",
            f"Open it with the agent's key: engram ui --key-file <{agent}'s key file> --server <this service>",
        )
    if owner.agent != agent:
        return _error(
            request, 403, "Not your agent", f"this session is {owner.agent}'s; it shows no other agent"
        )
    svc = services(request)

    def load() -> _MemoryView:
        size = svc.memory.sync_through(None)
        if tier == "archived":
            query: dict[str, Any] = {"tiers": None, "status": "archived"}
        elif tier == "past":
            query = {"tiers": None, "status": "superseded"}
        else:
            query = {"tiers": [tier], "status": "active"}
        items = svc.memory.items(
            agent, **query, after=None if after is None else parse_ref(after), limit=_PAGE + 1
        )
        by = svc.memory.item_counts(agent)
        counts = {t: by.get((t, "active"), 0) for t in ("HOT", "WARM", "COLD")}
        counts["archived"] = sum(n for (_, st), n in by.items() if st == "archived")
        counts["past"] = sum(n for (_, st), n in by.items() if st == "superseded")
        recall = None
        if q.strip():  # a long question is recalled by its most informative sentences
            result = svc.memory.recall(agent, recall_query(q), record_access=False)
            recall = result.render()
        return _MemoryView(
            items=items[:_PAGE], more=len(items) > _PAGE, counts=counts, recall=recall, size=size
        )

    try:
        view = await run_in_threadpool(load)
    except EngramError as e:
        return _error(
            request, 400, "Recall refused the query", f"{e} [{getattr(e, 'check', type(e).__name__)}]"
        )
    items = view.items
    return _page(
        request,
        "memory.html",
        owner=owner,
        agent=agent,
        tier=tier,
        tiers=_TIERS,
        q=q,
        next_after=items[-1].ref if view.more and items else None,
        **_fields(view),
    )
