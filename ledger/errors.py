"""Compatibility path: the error tree moved to :mod:`engram.protocol.errors`, shared by the client
and the service. Every name stays importable from here."""

from engram.protocol.errors import *  # noqa: F403 - the whole tree, re-exported unchanged
from engram.protocol.errors import __all__ as __all__
