"""Compatibility path: the HTTP client moved to :mod:`engram.client.http` and one agent's
memory to :mod:`engram.client.agent_memory` (install them without the server with the
``client`` extra). The names below stay importable from here; this file only re-exports
(tests/unit/test_house_imports.py holds it to that)."""

from engram.client import Buyer, HttpTransport, RemoteMemory, verify_item_proof, verify_receipt

__all__ = ["Buyer", "HttpTransport", "RemoteMemory", "verify_item_proof", "verify_receipt"]
