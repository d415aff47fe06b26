"""What an agent, a buyer, an auditor or an MCP server installs (the ``client`` extra of the engram-ledger distribution):
the agent SDK (:class:`Agent`, :class:`Transport`), one agent's memory over HTTP or in
process (:class:`AgentMemory`; ``RemoteMemory`` is its old name, kept as an alias), the
HTTP client (:class:`HttpTransport`, :class:`Buyer`) and the server demo. Imports only
:mod:`engram.protocol`, :mod:`verifier`, httpx and rich, never the service
(tests/unit/test_house_imports.py)."""

from engram.client.agent_memory import AgentMemory, MemoryTransport
from engram.client.http import Buyer, HttpTransport, verify_item_proof, verify_receipt
from engram.client.sdk import Agent, Transport
from engram.protocol.signer import AgentSigner

#: The old name of :class:`AgentMemory`, from before the five faces were folded into one.
RemoteMemory = AgentMemory

__all__ = [
    "Agent",
    "AgentMemory",
    "AgentSigner",
    "Buyer",
    "HttpTransport",
    "MemoryTransport",
    "RemoteMemory",
    "Transport",
    "verify_item_proof",
    "verify_receipt",
]
