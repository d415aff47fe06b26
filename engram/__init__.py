"""Engram's installable layers below and beside the service: :mod:`engram.protocol`
(what client and server agree on) and :mod:`engram.client` (what agents, buyers and
auditors install). Importing this package loads nothing.

The distribution is ``engram-ledger`` (the name ``engram`` on the package index belongs to an
unrelated project). It is not published there: install from a checkout or a built
wheel, e.g. ``pip install './[client]'``. The command (``engram``) and the import names stay."""

#: Libraries only the service needs (the ``server`` extra): the embedded log, ``engram serve``.
SERVER_LIBRARIES = frozenset(
    {
        "sqlalchemy",
        "alembic",
        "psycopg",
        "fastapi",
        "starlette",
        "uvicorn",
        "numpy",
        "wordllama",
        "bpe_openai",
        "jinja2",
        "swagger_ui_bundle",
    }
)
#: Libraries of the ``client`` extra the command line needs (typer, rich, pydantic for MCP).
CLIENT_LIBRARIES = frozenset(
    {"typer", "click", "rich", "httpx", "pydantic", "pydantic_core", "detect_secrets"}
)
#: This project's distribution name (``importlib.metadata``, pip).
DISTRIBUTION = "engram-ledger"


def install_hint(extra: str) -> str:
    """How to add an extra, as error messages say it."""
    return f"pip install '<engram checkout or wheel>[{extra}]' (the engram-ledger distribution)"
