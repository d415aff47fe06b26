"""Compatibility path: the HTTP client moved to :mod:`engram.client.http` (install it without the
server with the ``client`` extra). The names below stay importable from here."""

from engram.client.http import Buyer, HttpTransport, RemoteMemory, verify_item_proof, verify_receipt

__all__ = ["Buyer", "HttpTransport", "RemoteMemory", "verify_item_proof", "verify_receipt"]
