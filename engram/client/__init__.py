"""What an agent, a buyer, an auditor or an MCP server installs (the ``client`` extra of the engram-ledger distribution):
the agent SDK (:class:`Agent`, :class:`Transport`), the HTTP client (:class:`HttpTransport`,
:class:`RemoteMemory`, :class:`Buyer`) and the server demo. Imports only
:mod:`engram.protocol`, :mod:`verifier`, httpx and rich, never the service
(tests/unit/test_house_imports.py)."""

from engram.client.http import Buyer, HttpTransport, RemoteMemory, verify_item_proof, verify_receipt
from engram.client.sdk import Agent, Transport
from engram.protocol.signer import AgentSigner

__all__ = [
    "Agent",
    "AgentSigner",
    "Buyer",
    "HttpTransport",
    "RemoteMemory",
    "Transport",
    "verify_item_proof",
    "verify_receipt",
]
