"""The web UI served by ``engram serve`` under ``/ui``: the log explorer, agent
pages with plots, the owner's memory view and the buyer's in-browser bundle verifier.

Offline by construction: templates and static files ship in the package (no CDN), the
verifier that runs in the browser is ``static/engram-verify.js``, built from clients/ts.

A request to a UI route that fails before its page runs (a wrong ``?tier=``, an unknown
page) gets an HTML error page (:func:`html_errors`); the API's routes keep their problem
JSON.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from api.ui.pages import HERE, error_page, router

__all__ = ["html_errors", "is_ui_path", "mount_ui"]

Handler = Callable[[Request, Exception], Awaitable[Response]]

#: The error page's heading per status (the problem's title otherwise).
_TITLES = {
    400: "This page cannot show that",
    404: "No such page",
    405: "This page does not take that method",
    413: "The request is too large",
    429: "Too many requests: try again shortly",
    503: "The service is unavailable: try again shortly",
}
#: Headers of the problem kept on the page (what a client acts on).
_KEEP = ("allow", "retry-after")


def is_ui_path(path: str) -> bool:
    return path == "/ui" or path.startswith("/ui/")


def html_errors(handler: Handler) -> Handler:
    """``handler`` (one of api.problems'), but a UI route's error as an HTML page with the
    same status, saying what was wrong (each refused query value by name)."""

    async def handle(request: Request, exc: Exception) -> Response:
        resp = await handler(request, exc)
        if not is_ui_path(str(request.scope.get("path", ""))):
            return resp
        import json

        problem: dict[str, Any] = json.loads(bytes(resp.body)) if resp.body else {}
        status = resp.status_code
        errors = problem.get("errors") or []
        if errors:
            message = "; ".join(
                f"{'.'.join(str(p) for p in e.get('loc', [])[1:]) or 'the request'}: {e.get('msg', '')}"
                for e in errors
            )
        elif status == 404:
            message = f"there is no page at {request.scope.get('path', '')}"
        else:
            message = str(problem.get("detail") or "")
        if problem.get("check"):
            message += f" [{problem['check']}]"
        page = error_page(request, status, _TITLES.get(status, str(problem.get("title") or "Error")), message)
        for name in _KEEP:
            if name in resp.headers:
                page.headers[name] = resp.headers[name]
        return page

    return handle


async def favicon() -> FileResponse:
    return FileResponse(
        HERE / "static" / "favicon.svg",
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )


def mount_ui(app: FastAPI) -> None:
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.include_router(router)
    # Browsers and tools ask for /favicon.ico on any page of the service (the SVG answers it).
    app.add_api_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
