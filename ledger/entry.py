"""The ``engram`` command's entry point: the service CLI (:mod:`ledger.cli`), or a clear
message when only the client or the verifier is installed (``pip install 'engram[client]'``
has no database driver, no web server and no CLI framework)."""

from __future__ import annotations

import sys

#: Libraries only the service needs (the ``server`` extra).
SERVER_LIBRARIES = frozenset(
    {"sqlalchemy", "alembic", "psycopg", "typer", "fastapi", "pydantic_settings", "uvicorn"}
)


def main() -> None:
    try:
        from ledger.cli import main as cli_main
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in SERVER_LIBRARIES:
            raise
        sys.stderr.write(
            f"engram: the service is not installed here (missing {e.name}). Install it with\n"
            "    pip install 'engram[server]'\n"
            "The client (engram.client) and engram-verify work without it.\n"
        )
        raise SystemExit(2) from None
    cli_main()
