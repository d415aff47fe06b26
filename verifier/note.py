"""C2SP signed notes, verifier keys and tlog checkpoints, parsed strictly.

Trust role: a checkpoint is the only source of a tree size and root that a verifier accepts.
This module turns checkpoint bytes plus a trusted verifier key into a
:class:`VerifiedCheckpoint`, or raises.

Formats (specs/checkpoint.md, following c2sp.org/signed-note@v1 and
c2sp.org/tlog-checkpoint@v1):

* note = text (ends in ``\\n``) + ``\\n`` + one or more lines ``— <name> <base64>\\n``;
  the split is at the last blank line; valid UTF-8; no control characters but newline.
* signature bytes = 4-byte big-endian key id || Ed25519 signature over the note text.
* Ed25519 key id = SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4].
* verifier key = ``<name>+<8 lowercase hex key id>+<base64(0x01 || public key)>``.
* checkpoint text = origin, tree size (canonical decimal), base64 root; Engram checkpoints
  carry no extension lines, and this parser rejects them.

Strictness beyond the spec's minimum: base64 must be canonical (``validate=True`` and
re-encoding gives the same text), decimal sizes have no sign, spaces or leading zeros,
the note is bounded in bytes and in signatures, and a known key whose signature fails
rejects the whole note (C2SP: SHOULD). Signatures from unknown keys are ignored, so
witnesses' cosignatures and rotated log keys do not break verification.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from verifier.ed25519 import check_public_key
from verifier.errors import (
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    SignatureError,
    UnknownKeyError,
)
from verifier.merkle import HASH_SIZE, MAX_TREE_SIZE

__all__ = [
    "ALG_ED25519",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "Checkpoint",
    "NoteSignature",
    "SignedNote",
    "VerifiedCheckpoint",
    "VerifierKey",
    "b64decode_strict",
    "b64encode",
    "check_origin",
    "checkpoint_text",
    "ed25519_key_id",
    "encodes_as_utf8",
    "format_verifier_key",
    "parse_decimal",
    "sign_note",
    "verify_checkpoint",
]

ALG_ED25519 = 0x01
MAX_NOTE_BYTES = 64 * 1024
#: C2SP: verifiers MUST accept at least 16 signatures; Go's note package caps at 100.
MAX_SIGNATURES = 100
_EM_DASH = "\u2014"
_SIG_PREFIX = _EM_DASH + " "
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_UNICODE_SPACE = re.compile(r"\s|[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")


def b64encode(data: bytes) -> str:
    """Standard base64 (RFC 4648 §4) text of ``data``: the one encoding of bytes in JSON on
    every surface (hashes are lowercase hex; see specs/http-api.md)."""
    return base64.b64encode(data).decode("ascii")


def b64decode_strict(text: str, *, check: str) -> bytes:
    """Decode standard base64 (RFC 4648 §4) that is exactly the canonical encoding."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as e:
        raise MalformedError(f"invalid base64: {text[:40]!r}", check=check) from e
    if base64.b64encode(raw).decode("ascii") != text:
        raise MalformedError(f"non-canonical base64: {text[:40]!r}", check=check)
    return raw


def parse_decimal(text: str, *, check: str, maximum: int = MAX_TREE_SIZE) -> int:
    """Parse a canonical non-negative ASCII decimal (no sign, spaces or leading zeros)."""
    if not _DECIMAL.fullmatch(text):
        raise MalformedError(f"not a canonical decimal: {text[:40]!r}", check=check)
    value = int(text)
    if value > maximum:
        raise MalformedError(f"{value} exceeds {maximum}", check=check)
    return value


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` is valid Unicode text (a str may hold lone surrogates, which UTF-8
    cannot encode: command-line arguments decoded with ``surrogateescape``, say)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_key_name(name: str, *, check: str) -> None:
    if not name or "+" in name or _UNICODE_SPACE.search(name) or not encodes_as_utf8(name):
        raise MalformedError(
            f"key name {name[:60]!r} must be non-empty UTF-8 text, without spaces or '+'", check=check
        )


def check_origin(origin: object) -> str:
    """A log origin: 1-255 printable ASCII characters, no spaces and no '+' (it is also the
    checkpoint key's name, and key names may contain neither)."""
    if (
        not isinstance(origin, str)
        or not 0 < len(origin) <= 255
        or any(not 0x21 <= ord(c) <= 0x7E for c in origin)
        or "+" in origin
    ):
        raise MalformedError(
            f"origin {str(origin)[:80]!r} must be 1-255 printable ASCII characters without spaces or '+'",
            check="origin.format",
        )
    return origin


def ed25519_key_id(name: str, public_key: bytes) -> bytes:
    """C2SP signed-note key id for an Ed25519 key: SHA-256(name || 0x0A || 0x01 || pk)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key).digest()[:4]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifierKey:
    """A trusted Ed25519 note verifier key (name, key id, public key)."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def parse(cls, vkey: str) -> VerifierKey:
        """Parse ``<name>+<hex8 key id>+<base64(0x01 || pubkey)>``; the key id must match."""
        if not isinstance(vkey, str) or len(vkey) > 1024:
            raise MalformedError("verifier key must be a short string", check="vkey.format")
        # name and key id contain no '+'; the base64 key after them may.
        parts = vkey.split("+", 2)
        if len(parts) != 3:
            raise MalformedError("verifier key must be name+keyid+key", check="vkey.format")
        name, hex_id, b64 = parts
        _check_key_name(name, check="vkey.name")
        if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
            raise MalformedError("key id must be 8 lowercase hex digits", check="vkey.key_id")
        raw = b64decode_strict(b64, check="vkey.key")
        if len(raw) != 33 or raw[0] != ALG_ED25519:
            raise MalformedError(
                "only Ed25519 verifier keys (type 0x01, 32 bytes) are supported", check="vkey.alg"
            )
        public_key = check_public_key(raw[1:])
        key_id = bytes.fromhex(hex_id)
        if not hmac.compare_digest(key_id, ed25519_key_id(name, public_key)):
            raise MalformedError("key id does not match name and public key", check="vkey.key_id")
        return cls(name=name, key_id=key_id, public_key=public_key)

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> VerifierKey:
        """Build the verifier key of an Ed25519 public key under ``name``."""
        _check_key_name(name, check="vkey.name")
        check_public_key(public_key)
        return cls(name=name, key_id=ed25519_key_id(name, public_key), public_key=public_key)

    def __str__(self) -> str:
        return format_verifier_key(self.name, self.public_key)


def format_verifier_key(name: str, public_key: bytes) -> str:
    """``name+hex8(keyid)+base64(0x01 || public key)`` (c2sp.org/signed-note, vkey)."""
    key_id = ed25519_key_id(name, public_key)
    blob = base64.b64encode(bytes([ALG_ED25519]) + public_key).decode("ascii")
    return f"{name}+{key_id.hex()}+{blob}"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteSignature:
    """One signature line: key name, 4-byte key id, signature bytes."""

    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedNote:
    """A syntactically valid signed note; nothing about it is trusted yet."""

    text: str
    signatures: tuple[NoteSignature, ...]

    @classmethod
    def parse(cls, data: bytes) -> SignedNote:
        """Parse note bytes strictly (see module docstring). Raises MalformedError."""
        if not isinstance(data, bytes):
            raise MalformedError("note must be bytes", check="note.type")
        if len(data) > MAX_NOTE_BYTES:
            raise LimitExceededError(f"note of {len(data)} bytes exceeds {MAX_NOTE_BYTES}", check="note.size")
        try:
            msg = data.decode("utf-8", errors="strict")
        except UnicodeDecodeError as e:
            raise MalformedError("note is not valid UTF-8", check="note.encoding") from e
        if any(ord(c) < 0x20 and c != "\n" for c in msg) or "\x7f" in msg:
            raise MalformedError("note contains control characters", check="note.encoding")
        if not msg.endswith("\n"):
            raise MalformedError("note does not end with a newline", check="note.format")
        split = msg.rfind("\n\n")
        if split < 0:
            raise MalformedError("note has no blank line before signatures", check="note.format")
        text, sig_block = msg[: split + 1], msg[split + 2 :]
        lines = sig_block.split("\n")
        if lines[-1] != "":
            raise MalformedError("signature block must end with a newline", check="note.format")
        lines = lines[:-1]
        if not lines:
            raise MalformedError("note has no signatures", check="note.signatures")
        if len(lines) > MAX_SIGNATURES:
            raise LimitExceededError(
                f"note has {len(lines)} signatures, more than {MAX_SIGNATURES}",
                check="note.signatures",
            )
        sigs = []
        for line in lines:
            if not line.startswith(_SIG_PREFIX):
                raise MalformedError("signature line must start with '— '", check="note.signature_line")
            fields = line[len(_SIG_PREFIX) :].split(" ")
            if len(fields) != 2:
                raise MalformedError(
                    "signature line must be '— <name> <base64>'", check="note.signature_line"
                )
            name, b64 = fields
            _check_key_name(name, check="note.signature_line")
            raw = b64decode_strict(b64, check="note.signature_line")
            if len(raw) < 5:
                raise MalformedError("signature is shorter than 5 bytes", check="note.signature_line")
            sigs.append(NoteSignature(name=name, key_id=raw[:4], signature=raw[4:]))
        return cls(text=text, signatures=tuple(sigs))

    def verify(self, keys: Iterable[VerifierKey]) -> tuple[VerifierKey, ...]:
        """Verify against trusted keys; return the keys whose signatures verified.

        Signatures whose (name, key id) pair matches no trusted key are ignored. A matching
        signature that fails raises :class:`SignatureError` (the note is rejected whole).
        No verified signature at all raises :class:`UnknownKeyError`.
        """
        trusted = {(k.name, k.key_id): k for k in keys}
        verified: list[VerifierKey] = []
        message = self.text.encode("utf-8")
        for sig in self.signatures:
            key = trusted.get((sig.name, sig.key_id))
            if key is None:
                continue
            try:
                Ed25519PublicKey.from_public_bytes(key.public_key).verify(sig.signature, message)
            except InvalidSignature as e:
                raise SignatureError(
                    f"signature by {key.name} does not verify", check="note.signature"
                ) from e
            if key not in verified:
                verified.append(key)
        if not verified:
            raise UnknownKeyError("no signature by a trusted key", check="note.trusted_signature")
        return tuple(verified)


def sign_note(text: str, name: str, private_key: Ed25519PrivateKey) -> bytes:
    """Sign note ``text`` (must end in newline) with an Ed25519 key under ``name``."""
    if not text.endswith("\n") or "\n\n" in text:
        raise ValueError("note text must end in one newline and hold no blank lines")
    _check_key_name(name, check="note.signature_line")
    public = private_key.public_key().public_bytes_raw()
    sig = private_key.sign(text.encode("utf-8"))
    blob = base64.b64encode(ed25519_key_id(name, public) + sig).decode("ascii")
    return f"{text}\n{_SIG_PREFIX}{name} {blob}\n".encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """The three lines of a tlog checkpoint: origin, tree size, root hash."""

    origin: str
    size: int
    root: bytes

    @classmethod
    def parse_text(cls, text: str) -> Checkpoint:
        """Parse checkpoint note text (no extension lines allowed)."""
        lines = text.split("\n")
        if lines[-1] != "" or len(lines) < 4:
            raise MalformedError("checkpoint needs origin, size and root lines", check="checkpoint.format")
        body = lines[:-1]
        if len(body) != 3:
            raise MalformedError(
                "checkpoint has extension lines; Engram checkpoints carry none",
                check="checkpoint.extensions",
            )
        origin, size_text, root_text = body
        if not origin:
            raise MalformedError("checkpoint origin is empty", check="checkpoint.origin")
        size = parse_decimal(size_text, check="checkpoint.size")
        root = b64decode_strict(root_text, check="checkpoint.root")
        if len(root) != HASH_SIZE:
            raise MalformedError("checkpoint root is not 32 bytes", check="checkpoint.root")
        return cls(origin=origin, size=size, root=root)

    def text(self) -> str:
        return checkpoint_text(self.origin, self.size, self.root)


def checkpoint_text(origin: str, size: int, root: bytes) -> str:
    """The note text of a checkpoint: three newline-terminated lines."""
    return f"{origin}\n{size}\n{base64.b64encode(root).decode('ascii')}\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedCheckpoint:
    """A checkpoint whose log signature verified under a trusted key."""

    origin: str
    size: int
    root: bytes
    note: bytes
    signed_by: tuple[VerifierKey, ...]


def verify_checkpoint(data: bytes, log_key: VerifierKey, *, origin: str | None = None) -> VerifiedCheckpoint:
    """Verify a checkpoint note against the log's verifier key.

    Steps:

    1. ``note.*``: the note parses strictly.
    2. ``checkpoint.*``: its text is origin / canonical size / 32-byte base64 root, no extensions.
    3. ``origin``: the origin equals the log key's name (and ``origin`` if given).
    4. ``note.signature`` / ``note.trusted_signature``: the log key's signature verifies.
    """
    note = SignedNote.parse(data)
    cp = Checkpoint.parse_text(note.text)
    if cp.origin != log_key.name:
        raise OriginMismatchError(
            f"checkpoint origin {cp.origin!r} is not the log key's name {log_key.name!r}",
            check="checkpoint.origin",
        )
    if origin is not None and cp.origin != origin:
        raise OriginMismatchError(
            f"checkpoint origin {cp.origin!r} is not the expected {origin!r}",
            check="checkpoint.origin",
        )
    signed_by = note.verify([log_key])
    return VerifiedCheckpoint(origin=cp.origin, size=cp.size, root=cp.root, note=data, signed_by=signed_by)
