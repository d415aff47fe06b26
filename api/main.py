"""ASGI entry point: ``uvicorn api.main:app_factory --factory`` (what ``engram serve`` runs)."""

from fastapi import FastAPI

from api.app import create_app
from api.settings import ApiSettings

__all__ = ["app_factory"]


def app_factory() -> FastAPI:
    """Build the app from ``ENGRAM_*`` settings (refuses default secrets outside dev mode)."""
    return create_app(ApiSettings.from_env())
