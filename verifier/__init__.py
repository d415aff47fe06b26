"""Engram's trusted core: pure verification over bytes.

Imports only the standard library and ``cryptography``; never ``ledger``, ``api``,
SQLAlchemy, FastAPI, pydantic, httpx or psycopg (tests/test_verifier_imports.py proves it).
Every ``verify_*`` returns a verified value or raises a :class:`VerificationError`
subclass whose ``check`` names the failed check; none returns a bool.
"""

from verifier.errors import (
    CanonicalFormError,
    EngramError,
    KeyStateError,
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    ProofError,
    SignatureError,
    StreamChainError,
    UnknownKeyError,
    VerificationError,
)
from verifier.event import (
    Envelope,
    Leaf,
    NewKey,
    agent_key_id,
    body_commitment,
    verify_body,
    verify_event_signature,
)
from verifier.jcs import canonical_bytes, parse_canonical, parse_strict
from verifier.keys import KeyHistory, KeyRecord
from verifier.merkle import (
    EMPTY_ROOT,
    VerifiedConsistency,
    VerifiedInclusion,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)
from verifier.note import (
    Checkpoint,
    SignedNote,
    VerifiedCheckpoint,
    VerifierKey,
    verify_checkpoint,
)
from verifier.replay import LogReplay
from verifier.witness import WitnessError, WitnessKey, WitnessPolicy, verify_cosignatures

__all__ = [
    "EMPTY_ROOT",
    "CanonicalFormError",
    "Checkpoint",
    "EngramError",
    "Envelope",
    "KeyHistory",
    "KeyRecord",
    "KeyStateError",
    "Leaf",
    "LimitExceededError",
    "LogReplay",
    "MalformedError",
    "NewKey",
    "OriginMismatchError",
    "ProofError",
    "SignatureError",
    "SignedNote",
    "StreamChainError",
    "UnknownKeyError",
    "VerificationError",
    "VerifiedCheckpoint",
    "VerifiedConsistency",
    "VerifiedInclusion",
    "VerifierKey",
    "WitnessError",
    "WitnessKey",
    "WitnessPolicy",
    "agent_key_id",
    "body_commitment",
    "canonical_bytes",
    "leaf_hash",
    "node_hash",
    "parse_canonical",
    "parse_strict",
    "verify_body",
    "verify_checkpoint",
    "verify_consistency",
    "verify_cosignatures",
    "verify_event_signature",
    "verify_inclusion",
]
