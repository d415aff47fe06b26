"""Compatibility path: the agent SDK moved to :mod:`engram.client.sdk` (and the event signer to
:mod:`engram.protocol.signer`); the in-process transport is :mod:`ledger.inprocess`. The names
below stay importable from here."""

from engram.client.sdk import DEFAULT_STATE, Agent, Transport
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import StreamState
from ledger.inprocess import InProcess

__all__ = ["DEFAULT_STATE", "Agent", "AgentSigner", "InProcess", "StreamState", "Transport"]
