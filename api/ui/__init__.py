"""The web UI served by ``engram serve`` under ``/ui``: the log explorer, agent
pages with plots, the owner's memory view and the buyer's in-browser bundle verifier.

Offline by construction: templates and static files ship in the package (no CDN), the
verifier that runs in the browser is ``static/engram-verify.js``, built from clients/ts.
"""

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.ui.pages import HERE, router

__all__ = ["mount_ui"]


def mount_ui(app: FastAPI) -> None:
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.include_router(router)
