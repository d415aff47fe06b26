"""Engram's installable layers below and beside the service: :mod:`engram.protocol`
(what client and server agree on) and :mod:`engram.client` (what agents, buyers and
auditors install). Importing this package loads nothing."""
