"""Engram's installable layers below and beside the service: :mod:`engram.protocol`
(what client and server agree on) and :mod:`engram.client` (what agents, buyers and
auditors install). Importing this package loads nothing.

The distribution is ``engram-ledger`` (the name ``engram`` on the package index belongs to an
unrelated project). It is not published there: install from a checkout or a built
wheel, e.g. ``pip install './[client]'``. The command (``engram``) and the import names stay."""

#: This project's distribution name (``importlib.metadata``, pip).
DISTRIBUTION = "engram-ledger"


def install_hint(extra: str) -> str:
    """How to add an extra, as error messages say it."""
    return f"pip install '<engram checkout or wheel>[{extra}]' (the engram-ledger distribution)"
