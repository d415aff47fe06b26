"""Witness formats and policies (verifier.witness) and the witness's checks (ledger.witness.Witness).

Known answers come from the C2SP specs' published examples: the cosigned checkpoint of
tlog-cosignature.md and the add-checkpoint request of tlog-witness.md. The witness's
status codes follow tlog-witness v1, one test per row of its table.
"""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from ledger.witness import Witness, load_witness
from verifier.errors import VerificationError
from verifier.merkle import EMPTY_ROOT, consistency_ranges, root_from_leaf_hashes
from verifier.note import SignedNote, VerifierKey, checkpoint_text, sign_note, verify_checkpoint
from verifier.witness import (
    WitnessError,
    WitnessKey,
    WitnessPolicy,
    cosign,
    cosignature_message,
    cosigner_key_id,
    format_add_checkpoint,
    parse_add_checkpoint,
    verify_cosignatures,
)

# c2sp.org/tlog-cosignature, "Format": a checkpoint with its log signature and one cosignature.
SPEC_COSIGNED = (
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/"
    "Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJs"
    "X3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
).encode()

# c2sp.org/tlog-witness, "add-checkpoint": the example request body.
SPEC_REQUEST = (
    "old 20852014\n"
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    "\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/"
    "Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "\u2014 example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/"
    "V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
).encode()


def _wkey(seed: int, name: str = "w.example/1") -> tuple[Ed25519PrivateKey, WitnessKey]:
    priv = Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
    return priv, WitnessKey.from_public_key(name, priv.public_key().public_bytes_raw())


def test_spec_cosignature_decodes_to_its_key_id_and_timestamp() -> None:
    note = SignedNote.parse(SPEC_COSIGNED)
    cosig = next(s for s in note.signatures if s.name == "witness.example.com/w1")
    assert cosig.key_id.hex() == "8d66cf3f"
    assert int.from_bytes(cosig.signature[:8], "big") == 1679315147
    assert len(cosig.key_id + cosig.signature) == 76
    # the spec's signed message for it, byte for byte
    assert cosignature_message(note.text, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )


def test_spec_add_checkpoint_request_parses_and_reformats_byte_for_byte() -> None:
    req = parse_add_checkpoint(SPEC_REQUEST)
    assert req.old_size == 20852014
    assert len(req.proof) == 4 and all(len(h) == 32 for h in req.proof)
    assert SignedNote.parse(req.checkpoint).text.startswith("example.com/behind-the-sofa\n20852163\n")
    assert format_add_checkpoint(req.old_size, req.proof, req.checkpoint) == SPEC_REQUEST


@pytest.mark.parametrize(
    "body",
    [
        b"old 01\n\ncp",  # leading zero
        b"old -1\n\ncp",
        b"old 1\n",  # no empty line
        b"new 1\n\ncp",
        b"old 1\nAAAA\n\ncp",  # a proof line that is not a 32-byte hash
        b"old 1\n" + b"".join(base64.b64encode(bytes(32)) + b"\n" for _ in range(64)) + b"\ncp",
    ],
)
def test_malformed_add_checkpoint_requests_are_refused(body: bytes) -> None:
    with pytest.raises(WitnessError) as e:
        parse_add_checkpoint(body)
    assert e.value.check == "witness.request"


def test_cosigner_key_id_uses_type_0x04_not_the_note_type() -> None:
    _, key = _wkey(7)
    assert key.key_id == cosigner_key_id(key.name, key.public_key)
    assert WitnessKey.parse(str(key)) == key
    # the same key as a plain note verifier (type 0x01) has another key id and is not a witness key
    note_vkey = str(VerifierKey.from_public_key(key.name, key.public_key))
    assert note_vkey.split("+")[1] != key.key_id.hex()
    with pytest.raises(WitnessError):
        WitnessKey.parse(note_vkey)


def _signed_checkpoint(size: int = 3) -> tuple[bytes, Ed25519PrivateKey]:
    log = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    root = root_from_leaf_hashes([bytes([i]) * 32 for i in range(size)]) if size else EMPTY_ROOT
    return sign_note(checkpoint_text("log.example/a", size, root), "log.example/a", log), log


def test_cosignature_round_trip_and_tampering() -> None:
    note, _ = _signed_checkpoint()
    priv, key = _wkey(9)
    text = SignedNote.parse(note).text
    cosigned = note + cosign(text, key.name, priv, 1_700_000_000).encode()
    got = verify_cosignatures(cosigned, [key], now=1_700_000_100)
    assert got[key].timestamp == 1_700_000_000
    # a cosignature over another root does not verify
    other, _ = _signed_checkpoint(4)
    moved = other + cosign(text, key.name, priv, 1_700_000_000).encode()
    with pytest.raises(WitnessError) as e:
        verify_cosignatures(moved, [key], now=1_700_000_100)
    assert e.value.check == "witness.signature"
    # changing the timestamp bytes breaks the signature (the time is signed)
    line = cosign(text, key.name, priv, 1_700_000_000)
    raw = bytearray(base64.b64decode(line.split(" ")[2]))
    raw[11] ^= 1
    forged = note + f"\u2014 {key.name} {base64.b64encode(bytes(raw)).decode()}\n".encode()
    with pytest.raises(WitnessError) as e:
        verify_cosignatures(forged, [key], now=1_700_000_100)
    assert e.value.check == "witness.signature"
    # in the future, beyond the allowed skew
    with pytest.raises(WitnessError) as e:
        verify_cosignatures(cosigned, [key], now=1_600_000_000)
    assert e.value.check == "witness.timestamp"
    # wrong length
    short = note + f"\u2014 {key.name} {base64.b64encode(key.key_id + bytes(40)).decode()}\n".encode()
    with pytest.raises(WitnessError) as e:
        verify_cosignatures(short, [key])
    assert e.value.check == "witness.format"
    # zero timestamp: a witness must stamp its cosignature
    zero = note + f"\u2014 {key.name} {base64.b64encode(key.key_id + bytes(72)).decode()}\n".encode()
    with pytest.raises(WitnessError) as e:
        verify_cosignatures(zero, [key])
    assert e.value.check == "witness.timestamp"
    # a line of an unknown witness is ignored
    _, stranger = _wkey(10, "w.example/2")
    assert verify_cosignatures(cosigned, [stranger]) == {}


def _policy(n: int, tail: str) -> tuple[list[WitnessKey], WitnessPolicy]:
    keys = [_wkey(20 + i, f"w{i}.example/w")[1] for i in range(n)]
    text = "".join(f"witness W{i} {k}\n" for i, k in enumerate(keys)) + tail
    return keys, WitnessPolicy.parse(text)


def test_policy_grammar_of_the_spec_example() -> None:
    keys = [_wkey(30 + i, f"w{i}.example/w")[1] for i in range(6)]
    log = VerifierKey.from_public_key(
        "log.example/a", Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    )
    text = (
        f"# comment\nlog {log} https://log.example/a\n\n"
        + "".join(f"witness X{i + 1} {keys[i]}\n" for i in range(3))
        + "group X-witnesses 2 X1 X2 X3\n"
        + "".join(f"  witness\tY{i + 1} {keys[i + 3]}\n" for i in range(3))
        + "group Y-witnesses any Y1 Y2 Y3\n"
        + "group X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y\n"
    )
    p = WitnessPolicy.parse(text)
    assert p.logs == (log,) and p.log_urls == {"log.example/a": "https://log.example/a"}
    assert p.satisfied({"X1", "X3", "Y2"})
    assert not p.satisfied({"X1", "Y1", "Y2", "Y3"})
    assert not p.satisfied({"X1", "X2", "X3"})


@pytest.mark.parametrize(
    ("tail", "why"),
    [
        ("", "no quorum"),
        ("quorum W0\nquorum W1\n", "two quorum lines"),
        ("quorum W9\n", "undefined quorum"),
        ("group g 3 W0 W1\nquorum g\n", "threshold above n"),
        ("group g 0 W0 W1\nquorum g\n", "threshold zero"),
        ("group g 1 W0 W0\nquorum g\n", "member twice"),
        ("group g 1 W0 h\ngroup h 1 W1\nquorum g\n", "forward reference"),
        ("group W0 1 W1\nquorum W0\n", "name reused"),
        ("witnesses W3 x\nquorum W0\n", "unknown keyword"),
        ("group g 01 W0 W1\nquorum g\n", "non-canonical threshold"),
    ],
)
def test_policy_errors(tail: str, why: str) -> None:
    with pytest.raises(WitnessError) as e:
        _policy(2, tail)
    assert e.value.check == "witness.policy", why


def test_policy_refuses_duplicate_keys_and_ml_dsa_witnesses() -> None:
    _, key = _wkey(40)
    renamed = WitnessKey.from_public_key("other.example/w", key.public_key)
    with pytest.raises(WitnessError):
        WitnessPolicy.parse(f"witness a {key}\nwitness b {renamed}\nquorum a\n")
    mldsa = "w.example/m+00000000+" + base64.b64encode(b"\x06" + bytes(1312)).decode()
    with pytest.raises(WitnessError):
        WitnessPolicy.parse(f"witness a {mldsa}\nquorum a\n")
    with pytest.raises(WitnessError):
        WitnessPolicy.parse(b"witness a \x00\nquorum none\n")
    assert WitnessPolicy.parse("quorum none\n").satisfied(set())


@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(1, n), st.sets(st.integers(0, n - 1)))
    )
)
def test_threshold_quorum_is_k_of_n(case: tuple[int, int, set[int]]) -> None:
    n, k, cosigned = case
    keys = [_wkey(50 + i, f"t{i}.example/w")[1] for i in range(n)]
    p = WitnessPolicy.threshold(keys, k)
    assert p.satisfied({f"w{i}" for i in cosigned}) == (len(cosigned) >= k)


def test_policy_check_on_a_checkpoint_names_the_missing_quorum() -> None:
    note, log = _signed_checkpoint()
    vkey = VerifierKey.from_public_key("log.example/a", log.public_key().public_bytes_raw())
    privs = [_wkey(60 + i, f"q{i}.example/w") for i in range(3)]
    policy = WitnessPolicy.threshold([k for _, k in privs], 2)
    text = SignedNote.parse(note).text
    one = note + cosign(text, privs[0][1].name, privs[0][0], 1_700_000_000).encode()
    with pytest.raises(WitnessError) as e:
        policy.check(verify_checkpoint(one, vkey))
    assert e.value.check == "witness.quorum"
    two = one + cosign(text, privs[2][1].name, privs[2][0], 1_700_000_001).encode()
    assert policy.check(verify_checkpoint(two, vkey)) == ("w0", "w2")
    # a policy that lists logs refuses a checkpoint of another log
    other_log = VerifierKey.from_public_key(
        "log.example/b", Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    )
    listed = WitnessPolicy.parse(
        f"log {other_log}\n"
        + "".join(f"witness w{i} {k}\n" for i, (_, k) in enumerate(privs))
        + "quorum w0\n"
    )
    with pytest.raises(WitnessError) as e:
        listed.check(verify_checkpoint(two, vkey))
    assert e.value.check == "witness.policy"


# -- the witness: tlog-witness v1 statuses -------------------------------------------------------


class _Log:
    """A toy log: leaves are 32-byte hashes, checkpoints signed with a fixed key."""

    def __init__(self, seed: int = 1) -> None:
        self.key = Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
        self.vkey = VerifierKey.from_public_key("log.example/a", self.key.public_key().public_bytes_raw())
        self.leaves: list[bytes] = []

    def grow(self, n: int, tag: int = 0) -> bytes:
        self.leaves += [bytes([tag, len(self.leaves) % 256]) * 16 for _ in range(n)]
        return self.checkpoint(len(self.leaves))

    def checkpoint(self, size: int) -> bytes:
        root = root_from_leaf_hashes(self.leaves[:size]) if size else EMPTY_ROOT
        return sign_note(checkpoint_text(self.vkey.name, size, root), self.vkey.name, self.key)

    def proof(self, old: int, new: int) -> list[bytes]:
        return [root_from_leaf_hashes(self.leaves[lo:hi]) for lo, hi in consistency_ranges(old, new)]


@pytest.fixture
def witness(tmp_path: Path) -> tuple[Witness, _Log]:
    log = _Log()
    priv, _ = _wkey(70, "wit.example/w")
    return Witness(
        tmp_path, name="wit.example/w", key=priv, logs=[log.vkey], clock=lambda: 1_700_000_000
    ), log


def test_witness_cosigns_a_first_checkpoint_then_only_consistent_ones(witness: tuple[Witness, _Log]) -> None:
    w, log = witness
    cp5 = log.grow(5)
    r = w.add_checkpoint(format_add_checkpoint(0, [], cp5))
    assert r.status == 200
    verified = verify_cosignatures(cp5 + r.body, [w.vkey])
    assert verified[w.vkey].timestamp == 1_700_000_000
    cp9 = log.grow(4)
    assert w.add_checkpoint(format_add_checkpoint(5, log.proof(5, 9), cp9)).status == 200
    assert w.latest("log.example/a") is not None and w.latest("log.example/a").startswith(cp9[:-1])


def test_witness_status_codes(witness: tuple[Witness, _Log], tmp_path: Path) -> None:
    w, log = witness
    cp5 = log.grow(5)
    assert w.add_checkpoint(format_add_checkpoint(0, [], cp5)).status == 200
    # 404: unknown origin
    stranger = Ed25519PrivateKey.generate()
    unknown = sign_note(checkpoint_text("other.example/x", 1, bytes(32)), "other.example/x", stranger)
    assert w.add_checkpoint(format_add_checkpoint(0, [], unknown)).status == 404
    # 403: the origin is known, but no trusted key signed it
    impostor = sign_note(checkpoint_text("log.example/a", 6, bytes(32)), "log.example/a", stranger)
    assert w.add_checkpoint(format_add_checkpoint(5, [], impostor)).status == 403
    # 400: old size beyond the checkpoint, and malformed bodies
    assert w.add_checkpoint(format_add_checkpoint(9, [], cp5)).status == 400
    assert w.add_checkpoint(b"old 5\n").status == 400
    # 409: old size is not what the witness holds; the body says what it holds
    cp9 = log.grow(4)
    r = w.add_checkpoint(format_add_checkpoint(0, [], cp9))
    assert (r.status, r.body, r.content_type) == (409, b"5\n", "text/x.tlog.size")
    # 422: the consistency proof fails (a fork of the first five leaves)
    fork = _Log()
    fork.grow(9, tag=1)
    r = w.add_checkpoint(format_add_checkpoint(5, fork.proof(5, 9), fork.checkpoint(9)))
    assert r.status == 422
    # 409: same size, another root
    assert w.add_checkpoint(format_add_checkpoint(5, [], fork.checkpoint(5))).status == 409
    # 422: old size 0 with a non-empty proof is refused once the state is 0 (a fresh witness)
    fresh = Witness(tmp_path / "fresh", name="wit.example/w", key=w.key, logs=[log.vkey])
    assert fresh.add_checkpoint(format_add_checkpoint(0, [bytes(32)], cp5)).status == 422
    # 422: an empty tree with a root other than SHA-256("")
    empty = sign_note(checkpoint_text("log.example/a", 0, bytes(32)), "log.example/a", log.key)
    assert fresh.add_checkpoint(format_add_checkpoint(0, [], empty)).status == 422
    # nothing refused moved the state
    assert w.latest("log.example/a").startswith(cp5[: cp5.index(b"\n\n")])


def test_witness_state_survives_a_restart(tmp_path: Path) -> None:
    from ledger.witness import add_log, init_witness

    log = _Log()
    init_witness(tmp_path, "wit.example/r")
    add_log(tmp_path, str(log.vkey))
    w = load_witness(tmp_path)
    assert w.add_checkpoint(format_add_checkpoint(0, [], log.grow(3))).status == 200
    again = load_witness(tmp_path)
    r = again.add_checkpoint(format_add_checkpoint(0, [], log.grow(2)))
    assert (r.status, r.body) == (409, b"3\n")


def test_witness_never_rolls_back_under_racing_submissions(witness: tuple[Witness, _Log]) -> None:
    """tlog-witness: the old-size check and the write are atomic (the spec's race)."""
    w, log = witness
    assert w.add_checkpoint(format_add_checkpoint(0, [], log.grow(4))).status == 200
    sizes = [6, 8, 10, 12]
    for _ in range(8):
        log.grow(1)
    cps = {n: log.checkpoint(n) for n in sizes}
    results: dict[int, int] = {}

    def submit(n: int) -> None:
        results[n] = w.add_checkpoint(format_add_checkpoint(4, log.proof(4, n), cps[n])).status

    threads = [threading.Thread(target=submit, args=(n,)) for n in sizes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [200, 409, 409, 409]
    (won,) = [n for n, s in results.items() if s == 200]
    assert SignedNote.parse(w.latest("log.example/a")).text.split("\n")[1] == str(won)


@given(st.binary(max_size=400))
def test_fuzz_policy_request_and_cosignature_parsers_fail_only_with_named_checks(data: bytes) -> None:
    """No input reaches an untyped error: every failure is a VerificationError with a check."""
    note, _ = _signed_checkpoint()
    _, key = _wkey(80)
    line = f"\u2014 {key.name} ".encode() + base64.b64encode(key.key_id + data[:72]) + b"\n"
    for attempt in (
        lambda: WitnessPolicy.parse(data),
        lambda: WitnessPolicy.parse(b"witness a " + data + b"\nquorum a\n"),
        lambda: parse_add_checkpoint(data),
        lambda: parse_add_checkpoint(b"old 1\n" + data),
        lambda: verify_cosignatures(note + line, [key]),
        lambda: verify_cosignatures(data, [key]),
    ):
        checks = []
        try:
            attempt()
        except VerificationError as e:
            checks.append(e.check)
        assert all(c and c.split(".")[0] in {"witness", "note", "vkey", "key", "limit"} for c in checks), (
            checks
        )
