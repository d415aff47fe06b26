"""Witness cosignatures (c2sp.org/tlog-cosignature v1), witness policies (c2sp.org/tlog-policy)
and the add-checkpoint wire format (c2sp.org/tlog-witness).

Trust role: one log key can sign two different trees of the same size and show each to a
different party (a split view). A witness keeps, per log, the newest checkpoint it checked
and cosigns a new one only if it is consistent with that; a verifier that requires a
quorum of independent witnesses' cosignatures therefore accepts only checkpoints that the
rest of the world was shown too.

Formats, as the C2SP specs define them:

* cosigner vkey = ``<name>+<hex8 key id>+<base64(0x04 || 32-byte Ed25519 key)>``, with
  key id = SHA-256(name || 0x0A || 0x04 || public key)[:4];
* a cosignature is a note signature line ``— <name> base64(key id || u64 timestamp ||
  Ed25519 signature)``; the signed message is ``cosignature/v1\\n``, ``time <t>\\n`` and
  the whole checkpoint text (the note without its signature lines);
* a policy is lines ``log <vkey> [url]``, ``witness <name> <vkey> [url]``,
  ``group <name> <k|all|any> <member>...`` and exactly one ``quorum <name|none>``;
* an add-checkpoint request body is ``old <size>\\n``, up to 63 base64 consistency-proof
  lines, an empty line, and the signed checkpoint.

Checks (each a named :class:`~verifier.errors.VerificationError`):

* ``witness.format``: a cosignature line of a policy witness is not 76 bytes, or its
  timestamp exceeds 2**63-1;
* ``witness.timestamp``: a zero timestamp, or one more than ``max_skew_s`` in the future;
* ``witness.signature``: a policy witness's cosignature does not verify (the checkpoint is
  rejected whole, as a note with a failing known signature is);
* ``witness.quorum``: the witnesses whose cosignatures verified do not satisfy the quorum;
* ``witness.policy``: the policy does not parse, or does not list the checkpoint's log.

Only Ed25519 cosignatures (type 0x04) are supported; ML-DSA-44 (type 0x06) witnesses in a
policy are refused with ``witness.policy`` rather than silently ignored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from verifier.ed25519 import check_public_key
from verifier.errors import LimitExceededError, MalformedError, VerificationError
from verifier.merkle import HASH_SIZE, MAX_TREE_SIZE
from verifier.note import (
    MAX_NOTE_BYTES,
    SignedNote,
    VerifiedCheckpoint,
    VerifierKey,
    b64decode_strict,
    encodes_as_utf8,
    parse_decimal,
)

__all__ = [
    "ALG_COSIGNATURE_V1",
    "MAX_POLICY_BYTES",
    "AddCheckpoint",
    "Cosignature",
    "WitnessError",
    "WitnessKey",
    "WitnessPolicy",
    "check_witness_name",
    "cosign",
    "cosignature_message",
    "cosigner_key_id",
    "format_add_checkpoint",
    "parse_add_checkpoint",
    "verify_cosignatures",
]

ALG_COSIGNATURE_V1 = 0x04
_ALG_MLDSA44_COSIGNATURE = 0x06
_EM_DASH_PREFIX = "\u2014 "
_COSIGNATURE_BYTES = 4 + 8 + 64
MAX_TIMESTAMP = 2**63 - 1
#: A policy file is small: the spec recommends supporting 32 logs, witnesses and groups.
MAX_POLICY_BYTES = 64 * 1024
MAX_POLICY_ENTRIES = 256
#: tlog-witness: "The client MUST NOT send more than 63 consistency proof lines."
MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = MAX_NOTE_BYTES + 8 * 1024
#: How far in the future a cosignature's timestamp may lie (clock skew), by default.
DEFAULT_MAX_SKEW_S = 600


class WitnessError(VerificationError):
    """A witness cosignature, quorum or policy check failed."""

    default_check = "witness"


def check_witness_name(name: str) -> str:
    """A cosigner key name: non-empty, no whitespace, no '+' (signed-note key names)."""
    if (
        not isinstance(name, str)
        or not name
        or "+" in name
        or re.search(r"\s", name)
        or len(name) > 255
        or not encodes_as_utf8(name)
    ):
        raise WitnessError(
            f"witness name {str(name)[:60]!r} must be 1-255 characters of UTF-8 text without spaces or '+'",
            check="witness.key",
        )
    return name


def cosigner_key_id(name: str, public_key: bytes) -> bytes:
    """tlog-cosignature key id: SHA-256(name || 0x0A || 0x04 || 32-byte Ed25519 key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ALG_COSIGNATURE_V1]) + public_key).digest()[
        :4
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessKey:
    """A cosigner's Ed25519 key under its name (and, for logs that submit, its URL)."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def parse(cls, vkey: str) -> WitnessKey:
        """Parse ``<name>+<hex8>+<base64(0x04 || key)>``; the key id must match."""
        if not isinstance(vkey, str) or len(vkey) > 1024:
            raise WitnessError("witness key must be a short string", check="witness.key")
        parts = vkey.split("+", 2)
        if len(parts) != 3:
            raise WitnessError("witness key must be name+keyid+key", check="witness.key")
        name, hex_id, b64 = parts
        check_witness_name(name)
        if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
            raise WitnessError("key id must be 8 lowercase hex digits", check="witness.key")
        try:
            raw = b64decode_strict(b64, check="witness.key")
        except MalformedError as e:
            raise WitnessError(str(e), check="witness.key") from e
        if raw[:1] == bytes([_ALG_MLDSA44_COSIGNATURE]):
            raise WitnessError("ML-DSA-44 cosigners (type 0x06) are not supported", check="witness.key")
        if len(raw) != 33 or raw[0] != ALG_COSIGNATURE_V1:
            raise WitnessError(
                "a witness key is an Ed25519 cosignature/v1 key (type 0x04, 32 bytes)", check="witness.key"
            )
        try:
            public_key = check_public_key(raw[1:])
        except MalformedError as e:
            raise WitnessError(str(e), check="witness.key") from e
        key_id = bytes.fromhex(hex_id)
        if not hmac.compare_digest(key_id, cosigner_key_id(name, public_key)):
            raise WitnessError("key id does not match name and public key", check="witness.key")
        return cls(name=name, key_id=key_id, public_key=public_key)

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> WitnessKey:
        return cls.parse(_format_vkey(check_witness_name(name), public_key))

    def __str__(self) -> str:
        return _format_vkey(self.name, self.public_key)


def _format_vkey(name: str, public_key: bytes) -> str:
    blob = base64.b64encode(bytes([ALG_COSIGNATURE_V1]) + public_key).decode("ascii")
    return f"{name}+{cosigner_key_id(name, public_key).hex()}+{blob}"


def cosignature_message(checkpoint_text: str, timestamp: int) -> bytes:
    """The bytes a cosigner signs: header line, time line, then the checkpoint text."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValueError("cosignature timestamp is outside [0, 2**63-1]")
    return f"cosignature/v1\ntime {timestamp}\n".encode() + checkpoint_text.encode("utf-8")


def cosign(checkpoint_text: str, name: str, private_key: Ed25519PrivateKey, timestamp: int) -> str:
    """One cosignature note line (ending in a newline) over ``checkpoint_text``."""
    if timestamp < 1:
        raise ValueError("a cosignature carries a non-zero timestamp")
    public = private_key.public_key().public_bytes_raw()
    sig = private_key.sign(cosignature_message(checkpoint_text, timestamp))
    blob = cosigner_key_id(name, public) + timestamp.to_bytes(8, "big") + sig
    return f"{_EM_DASH_PREFIX}{name} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cosignature:
    """A verified cosignature: which witness, and when (POSIX seconds) it cosigned."""

    witness: str
    timestamp: int


def verify_cosignatures(
    note: bytes | SignedNote,
    witnesses: Iterable[WitnessKey],
    *,
    now: float | None = None,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
) -> dict[WitnessKey, Cosignature]:
    """Verify the cosignatures of the given witnesses on a checkpoint note.

    Lines whose (name, key id) matches no witness are ignored (the log's own signature,
    other witnesses). A matching line that is malformed, stamped zero or in the future, or
    that does not verify raises. Returns the witnesses whose cosignature verified."""
    parsed = note if isinstance(note, SignedNote) else SignedNote.parse(note)
    known = {(w.name, w.key_id): w for w in witnesses}
    limit = (time.time() if now is None else now) + max_skew_s
    out: dict[WitnessKey, Cosignature] = {}
    for sig in parsed.signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if len(sig.signature) != _COSIGNATURE_BYTES - 4:
            raise WitnessError(
                f"cosignature by {key.name} is {len(sig.signature) + 4} bytes, not {_COSIGNATURE_BYTES}",
                check="witness.format",
            )
        ts = int.from_bytes(sig.signature[:8], "big")
        if ts > MAX_TIMESTAMP:
            raise WitnessError(
                f"cosignature by {key.name}: timestamp exceeds 2**63-1", check="witness.format"
            )
        if ts == 0:
            raise WitnessError(
                f"cosignature by {key.name} carries a zero timestamp", check="witness.timestamp"
            )
        if ts > limit:
            raise WitnessError(
                f"cosignature by {key.name} is dated {ts}, in the future", check="witness.timestamp"
            )
        try:
            Ed25519PublicKey.from_public_bytes(key.public_key).verify(
                sig.signature[8:], cosignature_message(parsed.text, ts)
            )
        except InvalidSignature as e:
            raise WitnessError(f"cosignature by {key.name} does not verify", check="witness.signature") from e
        if key not in out or out[key].timestamp < ts:
            out[key] = Cosignature(witness=key.name, timestamp=ts)
    return out


# -- policy ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Group:
    name: str
    threshold: int
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyWitness:
    """A witness of a policy: its policy name, its key and its optional submission URL."""

    name: str
    key: WitnessKey
    url: str | None = None


def _fail(lineno: int, msg: str) -> WitnessError:
    return WitnessError(f"policy line {lineno}: {msg}", check="witness.policy")


class _PolicyReader:
    """A policy read line by line: one method per keyword, each checking its line against
    what the earlier lines defined (c2sp.org/tlog-policy)."""

    def __init__(self) -> None:
        self.logs: list[VerifierKey] = []
        self.log_urls: dict[str, str] = {}
        self.witnesses: list[PolicyWitness] = []
        self.groups: dict[str, _Group] = {}
        self.names: set[str] = set()
        self.public_keys: set[bytes] = set()
        self.quorum: str | None = None
        self.seen_quorum = False
        self.entries = 0

    def line(self, lineno: int, fields: list[str]) -> None:
        self.entries += 1
        if self.entries > MAX_POLICY_ENTRIES:
            raise LimitExceededError(
                f"policy has more than {MAX_POLICY_ENTRIES} entries", check="witness.policy"
            )
        keyword = {"log": self.log, "witness": self.witness, "group": self.group, "quorum": self.quorum_line}
        read = keyword.get(fields[0])
        if read is None:
            raise _fail(lineno, f"unknown keyword {fields[0]!r}")
        read(lineno, fields)

    def _new_key(self, lineno: int, public_key: bytes) -> None:
        if public_key in self.public_keys:
            raise _fail(lineno, "duplicate public key")
        self.public_keys.add(public_key)

    def _new_name(self, lineno: int, name: str) -> None:
        if name in self.names or name == "none":
            raise _fail(lineno, f"name {name!r} is already defined")

    def log(self, lineno: int, fields: list[str]) -> None:
        if len(fields) not in (2, 3):
            raise _fail(lineno, "expected 'log <vkey> [<url>]'")
        try:
            key = VerifierKey.parse(fields[1])
        except MalformedError as e:
            raise _fail(lineno, f"log key: {e}") from e
        self._new_key(lineno, key.public_key)
        self.logs.append(key)
        if len(fields) == 3:
            self.log_urls[key.name] = fields[2]

    def witness(self, lineno: int, fields: list[str]) -> None:
        if len(fields) not in (3, 4):
            raise _fail(lineno, "expected 'witness <name> <vkey> [<url>]'")
        name = fields[1]
        self._new_name(lineno, name)
        try:
            wkey = WitnessKey.parse(fields[2])
        except WitnessError as e:
            raise _fail(lineno, str(e)) from e
        self._new_key(lineno, wkey.public_key)
        self.names.add(name)
        self.witnesses.append(PolicyWitness(name=name, key=wkey, url=fields[3] if len(fields) == 4 else None))

    def group(self, lineno: int, fields: list[str]) -> None:
        if len(fields) < 4:
            raise _fail(lineno, "expected 'group <name> <k|all|any> <member>...'")
        name, k_text, members = fields[1], fields[2], tuple(fields[3:])
        self._new_name(lineno, name)
        if len(set(members)) != len(members):
            raise _fail(lineno, "a member is listed twice")
        for m in members:
            if m not in self.names:
                raise _fail(lineno, f"member {m!r} is not defined on an earlier line")
        self.names.add(name)
        self.groups[name] = _Group(
            name=name, threshold=_threshold(lineno, k_text, len(members)), members=members
        )

    def quorum_line(self, lineno: int, fields: list[str]) -> None:
        if len(fields) != 2:
            raise _fail(lineno, "expected 'quorum <name>'")
        if self.seen_quorum:
            raise _fail(lineno, "a policy has exactly one quorum line")
        self.seen_quorum = True
        if fields[1] != "none" and fields[1] not in self.names:
            raise _fail(lineno, f"quorum {fields[1]!r} is not defined on an earlier line")
        self.quorum = None if fields[1] == "none" else fields[1]


def _threshold(lineno: int, k_text: str, n: int) -> int:
    """A group's threshold: ``all``, ``any`` or a decimal in [1, n]."""
    if k_text == "all":
        return n
    if k_text == "any":
        return 1
    try:
        k = parse_decimal(k_text, check="witness.policy", maximum=n)
    except MalformedError as e:
        raise _fail(lineno, f"threshold {k_text!r} is not a decimal in [1, {n}]") from e
    if k < 1:
        raise _fail(lineno, f"threshold {k_text!r} is not a decimal in [1, {n}]")
    return k


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessPolicy:
    """A c2sp.org/tlog-policy: accepted logs, known witnesses and the quorum rule.

    ``quorum`` is ``None`` for ``quorum none`` (no cosignature needed)."""

    logs: tuple[VerifierKey, ...]
    log_urls: Mapping[str, str]
    witnesses: tuple[PolicyWitness, ...]
    groups: Mapping[str, _Group]
    quorum: str | None

    @classmethod
    def parse(cls, data: bytes | str) -> WitnessPolicy:
        """Parse a policy file strictly (names must be UTF-8; see the module docstring)."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        if len(raw) > MAX_POLICY_BYTES:
            raise LimitExceededError(f"policy exceeds {MAX_POLICY_BYTES} bytes", check="witness.policy")
        if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", raw):
            raise WitnessError(
                "policy holds control characters other than tab and newline", check="witness.policy"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise WitnessError("policy is not UTF-8", check="witness.policy") from e
        reader = _PolicyReader()
        for lineno, line in enumerate(text.split("\n"), 1):
            fields = line.replace("\t", " ").split()
            if fields and not fields[0].startswith("#"):
                reader.line(lineno, fields)
        if not reader.seen_quorum:
            raise WitnessError("policy has no quorum line", check="witness.policy")
        return cls(
            logs=tuple(reader.logs),
            log_urls=reader.log_urls,
            witnesses=tuple(reader.witnesses),
            groups=reader.groups,
            quorum=reader.quorum,
        )

    @classmethod
    def threshold(cls, keys: Sequence[WitnessKey | str], k: int) -> WitnessPolicy:
        """A policy of ``k`` of the given witness keys (no log restriction)."""
        parsed = [w if isinstance(w, WitnessKey) else WitnessKey.parse(w) for w in keys]
        lines = [f"witness w{i} {w}" for i, w in enumerate(parsed)]
        if not parsed:
            raise WitnessError("a witness quorum needs at least one witness key", check="witness.policy")
        lines.append(f"group quorum {k} " + " ".join(f"w{i}" for i in range(len(parsed))))
        lines.append("quorum quorum")
        return cls.parse("\n".join(lines) + "\n")

    @property
    def keys(self) -> tuple[WitnessKey, ...]:
        return tuple(w.key for w in self.witnesses)

    def satisfied(self, cosigned: Iterable[str]) -> bool:
        """Whether the witnesses named (policy names) satisfy the quorum."""
        if self.quorum is None:
            return True
        done = set(cosigned)
        memo: dict[str, bool] = {}

        def met(name: str) -> bool:
            if name not in memo:
                group = self.groups.get(name)
                memo[name] = (
                    name in done
                    if group is None
                    else sum(1 for m in group.members if met(m)) >= group.threshold
                )
            return memo[name]

        return met(self.quorum)

    def check(
        self, cp: VerifiedCheckpoint, *, now: float | None = None, max_skew_s: int = DEFAULT_MAX_SKEW_S
    ) -> tuple[str, ...]:
        """Require the policy's quorum of cosignatures on a verified checkpoint.

        Returns the policy names of the witnesses that cosigned (sorted)."""
        if self.logs and not any(
            k.name == cp.origin and any(s.public_key == k.public_key for s in cp.signed_by) for k in self.logs
        ):
            raise WitnessError(
                f"the witness policy does not list the log {cp.origin!r} under the key that signed it",
                check="witness.policy",
            )
        verified = verify_cosignatures(cp.note, self.keys, now=now, max_skew_s=max_skew_s)
        by_key = {w.key: w.name for w in self.witnesses}
        cosigned = sorted(by_key[k] for k in verified)
        if not self.satisfied(cosigned):
            have = ", ".join(cosigned) or "no policy witness"
            raise WitnessError(
                f"checkpoint {cp.origin} size {cp.size} is cosigned by {have}: "
                f"the witness quorum {self.quorum!r} is not met",
                check="witness.quorum",
            )
        return tuple(cosigned)

    def __call__(self, cp: VerifiedCheckpoint) -> tuple[str, ...]:
        """Use the policy as :func:`verifier.bundle.verify_bundle`'s ``witnesses`` hook."""
        return self.check(cp)


# -- tlog-witness add-checkpoint ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AddCheckpoint:
    """A parsed add-checkpoint request: old size, consistency proof, checkpoint note bytes."""

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: bytes


def format_add_checkpoint(old_size: int, proof: Sequence[bytes], checkpoint: bytes) -> bytes:
    """The request body of ``POST <prefix>/add-checkpoint``."""
    if len(proof) > MAX_PROOF_LINES:
        raise ValueError(f"at most {MAX_PROOF_LINES} consistency proof lines")
    lines = [f"old {old_size}\n"] + [base64.b64encode(h).decode("ascii") + "\n" for h in proof]
    return ("".join(lines) + "\n").encode("ascii") + checkpoint


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Parse an add-checkpoint request body strictly (named ``witness.request`` on failure)."""
    if len(body) > MAX_REQUEST_BYTES:
        raise LimitExceededError(f"request exceeds {MAX_REQUEST_BYTES} bytes", check="witness.request")
    split = body.find(b"\n\n")
    if split < 0:
        raise WitnessError("request has no empty line before the checkpoint", check="witness.request")
    try:
        head = body[: split + 1].decode("ascii")
    except UnicodeDecodeError as e:
        raise WitnessError("request header is not ASCII", check="witness.request") from e
    lines = head.split("\n")[:-1]
    if not lines[0].startswith("old "):
        raise WitnessError("request must start with 'old <size>'", check="witness.request")
    try:
        old = parse_decimal(lines[0][4:], check="witness.request", maximum=MAX_TREE_SIZE)
    except MalformedError as e:
        raise WitnessError(str(e), check="witness.request") from e
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise WitnessError(f"more than {MAX_PROOF_LINES} consistency proof lines", check="witness.request")
    proof = []
    for line in lines[1:]:
        try:
            h = b64decode_strict(line, check="witness.request")
        except MalformedError as e:
            raise WitnessError(str(e), check="witness.request") from e
        if len(h) != HASH_SIZE:
            raise WitnessError("a consistency proof line is not a 32-byte hash", check="witness.request")
        proof.append(h)
    return AddCheckpoint(old_size=old, proof=tuple(proof), checkpoint=body[split + 2 :])
