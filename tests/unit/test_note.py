"""C2SP signed notes and checkpoints: strict parsing and verification, table-driven."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from verifier.errors import (
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    SignatureError,
    UnknownKeyError,
    VerificationError,
)
from verifier.merkle import leaf_hash
from verifier.note import (
    SignedNote,
    VerifierKey,
    checkpoint_text,
    ed25519_key_id,
    format_verifier_key,
    sign_note,
    verify_checkpoint,
)

ORIGIN = "example.com/log"
KEY = Ed25519PrivateKey.from_private_bytes(bytes(32))
VKEY = VerifierKey.parse(format_verifier_key(ORIGIN, KEY.public_key().public_bytes_raw()))
ROOT = leaf_hash(b"root")
NOTE = sign_note(checkpoint_text(ORIGIN, 1234, ROOT), ORIGIN, KEY)


def test_a_checkpoint_verifies() -> None:
    cp = verify_checkpoint(NOTE, VKEY, origin=ORIGIN)
    assert (cp.origin, cp.size, cp.root) == (ORIGIN, 1234, ROOT)


def test_vkey_format_and_key_id() -> None:
    pub = KEY.public_key().public_bytes_raw()
    name, hex_id, blob = str(VKEY).split("+", 2)
    assert name == ORIGIN and bytes.fromhex(hex_id) == ed25519_key_id(ORIGIN, pub)
    assert base64.b64decode(blob) == b"\x01" + pub


@pytest.mark.parametrize(
    "vkey",
    [
        "",
        "name+deadbeef",
        "na me+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
        "example.com/foo+530D903A+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
        "example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
        "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2",
        "example.com/foo+530d903a+AukyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
    ],
)
def test_bad_verifier_keys(vkey: str) -> None:
    with pytest.raises(MalformedError):
        VerifierKey.parse(vkey)


def test_a_key_name_with_a_lone_surrogate_is_a_typed_error() -> None:
    """Regression (found by atheris, tests/harness/fuzz.py): a name holding a lone surrogate,
    as a command-line argument decoded with surrogateescape does, reached the key-id hash
    and raised UnicodeEncodeError instead of the parser's typed error."""
    from verifier.witness import WitnessError, WitnessKey

    public = KEY.public_key().public_bytes_raw()
    good = format_verifier_key(ORIGIN, public)
    bad = "example.c\udcf8m/log" + good[len(ORIGIN) :]
    with pytest.raises(MalformedError) as e:
        VerifierKey.parse(bad)
    assert e.value.check == "vkey.name"
    with pytest.raises(MalformedError):
        VerifierKey.from_public_key("w\udcf8", public)
    witness = str(WitnessKey.from_public_key("w.example/1", public))
    with pytest.raises(WitnessError) as w:
        WitnessKey.parse("w.ex\udcf8mple/1" + witness[len("w.example/1") :])
    assert w.value.check == "witness.key"
    with pytest.raises(WitnessError):
        WitnessKey.from_public_key("w\udcf8", public)


def _resign(text: str) -> bytes:
    return sign_note(text, ORIGIN, KEY)


def _raw_note(text: str, sig_lines: list[str]) -> bytes:
    return (text + "\n" + "".join(line + "\n" for line in sig_lines)).encode()


SIG_LINE = NOTE.decode().split("\n\n")[1].rstrip("\n")


@pytest.mark.parametrize(
    ("data", "error", "check"),
    [
        (b"", MalformedError, "note.format"),
        (NOTE[:-1], MalformedError, "note.format"),
        (NOTE.replace(b"\n\n", b"\n"), MalformedError, "note.format"),
        (NOTE + b"\r", MalformedError, "note.encoding"),
        (NOTE.replace(b"1234", b"12\t4"), MalformedError, "note.encoding"),
        (b"\xff" + NOTE, MalformedError, "note.encoding"),
        (NOTE.replace("\u2014".encode(), b"-"), MalformedError, "note.signature_line"),
        (NOTE[:-3] + b"!=\n", MalformedError, "note.signature_line"),
        (NOTE[:-2] + b"\n", MalformedError, "note.signature_line"),
        (NOTE[:-1] + b" \n", MalformedError, "note.signature_line"),
        (NOTE + b"x" * (64 * 1024), LimitExceededError, "note.size"),
        (
            _raw_note(checkpoint_text(ORIGIN, 1, ROOT), [SIG_LINE] * 101),
            LimitExceededError,
            "note.signatures",
        ),
        (_resign(f"{ORIGIN}\n01234\n{base64.b64encode(ROOT).decode()}\n"), MalformedError, "checkpoint.size"),
        (
            _resign(f"{ORIGIN}\n1234\n{base64.b64encode(ROOT).decode()}\nextension\n"),
            MalformedError,
            "checkpoint.extensions",
        ),
        (_resign(f"{ORIGIN}\n1234\n"), MalformedError, "checkpoint.format"),
        (
            _resign(f"{ORIGIN}\n99999999999999999999\n{base64.b64encode(ROOT).decode()}\n"),
            MalformedError,
            "checkpoint.size",
        ),
    ],
)
def test_strict_parsing(data: bytes, error: type[VerificationError], check: str) -> None:
    with pytest.raises(error) as e:
        verify_checkpoint(data, VKEY)
    assert e.value.check == check


def test_unknown_keys_are_ignored_but_one_trusted_signature_is_required() -> None:
    other = Ed25519PrivateKey.from_private_bytes(bytes([7]) * 32)
    other_line = (
        sign_note(NOTE.decode().split("\n\n")[0] + "\n", "witness.example/w1", other)
        .decode()
        .split("\n\n")[1]
    )
    cosigned = NOTE + other_line.encode()
    assert verify_checkpoint(cosigned, VKEY).size == 1234  # a witness line does not break it
    with pytest.raises(UnknownKeyError):
        SignedNote.parse(cosigned).verify([VerifierKey.from_public_key("nobody", VKEY.public_key)])


def test_a_failing_signature_from_a_known_key_rejects_the_note() -> None:
    wrong = Ed25519PrivateKey.from_private_bytes(bytes([9]) * 32)
    bad_sig = base64.b64encode(VKEY.key_id + wrong.sign(b"other text")).decode()
    forged = NOTE.decode().split("\n\n")[0] + "\n\n" + f"\u2014 {ORIGIN} {bad_sig}\n" + SIG_LINE + "\n"
    with pytest.raises(SignatureError):
        verify_checkpoint(forged.encode(), VKEY)


def test_origin_must_match_the_key_and_the_expectation() -> None:
    other_origin = "example.com/other"
    note = sign_note(checkpoint_text(other_origin, 1, ROOT), other_origin, KEY)
    with pytest.raises(OriginMismatchError):
        verify_checkpoint(note, VKEY)
    with pytest.raises(OriginMismatchError):
        verify_checkpoint(NOTE, VKEY, origin=other_origin)


@given(st.data())
def test_any_single_byte_change_is_rejected(data: st.DataObject) -> None:
    pos = data.draw(st.integers(min_value=0, max_value=len(NOTE) - 1))
    new = data.draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != NOTE[pos]))
    tampered = NOTE[:pos] + bytes([new]) + NOTE[pos + 1 :]
    with pytest.raises(VerificationError):
        verify_checkpoint(tampered, VKEY)
