"""Write specs/vectors/*.json, the known-answer vectors both ledger and verifier tests load.

Run ``python tests/tools/make_vectors.py`` after an intentional format change (and bump the
spec version). ``tests/test_vectors.py`` checks that the committed files are what this
script produces, and that the external answers (RFC 6962 roots from transparency-dev's
test data, the C2SP signed-note examples) still hold.

Every key here comes from a fixed seed and every salt and time is fixed; Ed25519 is
deterministic, so the signatures are reproducible byte for byte.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from verifier.event import (  # noqa: E402
    Envelope,
    Leaf,
    agent_key_id,
    body_commitment,
    commitment_of,
    digest_form,
    disclose_entries,
    entry_digest,
    sign_event,
    sign_pop,
)
from verifier.jcs import canonical_bytes  # noqa: E402
from verifier.merkle import (  # noqa: E402
    consistency_ranges,
    inclusion_ranges,
    leaf_hash,
    root_from_leaf_hashes,
)
from verifier.note import checkpoint_text, format_verifier_key, sign_note  # noqa: E402

OUT = ROOT / "specs" / "vectors"

# transparency-dev/merkle testonly/constants.go leaf inputs and RFC 6962 roots (external).
RFC6962_LEAVES = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
RFC6962_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def merkle_vectors() -> dict[str, Any]:
    hashes = [leaf_hash(bytes.fromhex(x)) for x in RFC6962_LEAVES]

    def mth(lo: int, hi: int) -> bytes:
        return root_from_leaf_hashes(hashes[lo:hi])

    inclusion = []
    consistency = []
    for n in range(1, 9):
        for m in range(n):
            inclusion.append(
                {"index": m, "size": n, "proof": [mth(lo, hi).hex() for lo, hi in inclusion_ranges(m, n)]}
            )
        for m in range(0, n + 1):
            consistency.append(
                {
                    "old_size": m,
                    "new_size": n,
                    "proof": [mth(lo, hi).hex() for lo, hi in consistency_ranges(m, n)],
                }
            )
    return {
        "description": "RFC 6962/9162 known answers: leaf inputs and roots from transparency-dev/merkle "
        "testonly; proofs as RFC 9162 PATH/PROOF, all checked against those roots.",
        "leaves": RFC6962_LEAVES,
        "roots": RFC6962_ROOTS,
        "inclusion": inclusion,
        "consistency": consistency,
        "invalid_inclusion": [
            {
                "why": "index equals size",
                "index": 3,
                "size": 3,
                "proof": [mth(2, 3).hex()],
                "check": "inclusion.range",
            },
            {
                "why": "proof one hash short",
                "index": 0,
                "size": 8,
                "proof": [mth(1, 2).hex(), mth(2, 4).hex()],
                "check": "inclusion.length",
            },
            {
                "why": "sibling order swapped",
                "index": 0,
                "size": 4,
                "proof": [mth(2, 4).hex(), mth(1, 2).hex()],
                "check": "inclusion.root",
            },
        ],
        "odd_duplication": {
            "why": "[a,b,c] and [a,b,c,c] must differ (no Bitcoin-style odd-node duplication)",
            "root_abc": root_from_leaf_hashes([leaf_hash(b"a"), leaf_hash(b"b"), leaf_hash(b"c")]).hex(),
            "root_abcc": root_from_leaf_hashes(
                [leaf_hash(b"a"), leaf_hash(b"b"), leaf_hash(b"c"), leaf_hash(b"c")]
            ).hex(),
        },
    }


LOG_SEED = bytes(range(32))
AGENT_SEED = bytes(range(100, 132))
ROTATED_SEED = bytes(range(150, 182))
ORIGIN = "example.com/engram-vectors"


def note_vectors() -> dict[str, Any]:
    key = Ed25519PrivateKey.from_private_bytes(LOG_SEED)
    pub = key.public_key().public_bytes_raw()
    root = root_from_leaf_hashes([leaf_hash(bytes.fromhex(x)) for x in RFC6962_LEAVES[:5]])
    text = checkpoint_text(ORIGIN, 5, root)
    note = sign_note(text, ORIGIN, key)
    empty = sign_note(checkpoint_text(ORIGIN, 0, bytes.fromhex(RFC6962_ROOTS[0])), ORIGIN, key)
    return {
        "description": "C2SP signed-note and tlog-checkpoint vectors. The first two are the C2SP / "
        "golang.org/x/mod examples (external); the others are Engram checkpoints from a fixed seed.",
        "external": [
            {
                "vkey": "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
                "note": "This is an example message.\n\n\u2014 example.com/foo "
                "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n",
            },
            {
                "vkey": "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
                "note": "If you think cryptography is the answer to your problem,\n"
                "then you don't know what your problem is.\n\n\u2014 PeterNeumann "
                "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n",
            },
        ],
        "log_seed_hex": LOG_SEED.hex(),
        "log_vkey": format_verifier_key(ORIGIN, pub),
        "checkpoints": [
            {"origin": ORIGIN, "size": 5, "root": root.hex(), "note": note.decode()},
            {"origin": ORIGIN, "size": 0, "root": RFC6962_ROOTS[0], "note": empty.decode()},
        ],
        "invalid_checkpoints": [
            {
                "why": "leading zero in size",
                "text": f"{ORIGIN}\n05\n{base64.b64encode(root).decode()}\n",
                "check": "checkpoint.size",
            },
            {
                "why": "plus sign in size",
                "text": f"{ORIGIN}\n+5\n{base64.b64encode(root).decode()}\n",
                "check": "checkpoint.size",
            },
            {
                "why": "extension line",
                "text": f"{ORIGIN}\n5\n{base64.b64encode(root).decode()}\nTimestamp: 1\n",
                "check": "checkpoint.extensions",
            },
            {
                "why": "root not 32 bytes",
                "text": f"{ORIGIN}\n5\n{base64.b64encode(root[:31]).decode()}\n",
                "check": "checkpoint.root",
            },
            {
                "why": "non-canonical base64 root",
                "text": f"{ORIGIN}\n5\n{base64.b64encode(root).decode()[:-1]}\n",
                "check": "checkpoint.root",
            },
        ],
    }


def event_vectors() -> dict[str, Any]:
    agent_key = Ed25519PrivateKey.from_private_bytes(AGENT_SEED)
    new_key = Ed25519PrivateKey.from_private_bytes(ROTATED_SEED)
    pub = agent_key.public_key().public_bytes_raw()
    kid = agent_key_id(pub)
    out: list[dict[str, Any]] = []

    def add(
        name: str,
        kind: str,
        body: dict[str, Any],
        version: int,
        prev: str | None,
        index: int,
        ts: int,
        signer: Ed25519PrivateKey,
        nk: Ed25519PrivateKey | None = None,
    ) -> Leaf:
        salt = bytes([index]) * 16
        body_jcs = canonical_bytes(body)
        env = Envelope(
            origin=ORIGIN,
            agent="vector-agent",
            key_id=agent_key_id(signer.public_key().public_bytes_raw()),
            kind=kind,
            version=version,
            prev=prev,
            client_time_us=ts - 500,
            body_commitment=body_commitment(salt, body_jcs),
            new_key=None if nk is None else sign_pop(origin=ORIGIN, agent="vector-agent", private_key=nk),
        )
        sig = sign_event(env, signer)
        leaf = Leaf.build(index=index, timestamp_us=ts, envelope=env, signature=sig)
        out.append(
            {
                "name": name,
                "body": body,
                "body_jcs": body_jcs.decode(),
                "salt_hex": salt.hex(),
                "body_commitment": env.body_commitment,
                "envelope_jcs": env.canonical().decode(),
                "signature_b64": base64.b64encode(sig).decode(),
                "index": index,
                "timestamp_us": ts,
                "leaf": leaf.raw.decode(),
                "leaf_hash": leaf.hash.hex(),
            }
        )
        return leaf

    reg = add(
        "registration",
        "key.registered",
        {"description": "vector agent"},
        0,
        None,
        0,
        1_790_000_000_000_001,
        agent_key,
        agent_key,
    )
    first = add(
        "first pact outcome",
        "pact.outcome",
        {"pact": "p-1", "quality": 94, "result": "fulfilled"},
        0,
        None,
        1,
        1_790_000_000_000_002,
        agent_key,
    )
    add(
        "second pact outcome (prev link)",
        "pact.outcome",
        {"pact": "p-2", "quality": 71, "result": "violated", "note": 'caf\u00e9 \U0001f600 "quoted"\n'},
        1,
        first.hash.hex(),
        2,
        1_790_000_000_000_003,
        agent_key,
    )
    add("rotation", "key.rotated", {}, 0, None, 3, 1_790_000_000_000_004, agent_key, new_key)
    _ = reg
    return {
        "description": "Engram event envelopes and leaves from fixed seeds, salts and times "
        "(specs/event-envelope.md, specs/leaf.md).",
        "origin": ORIGIN,
        "agent": "vector-agent",
        "agent_seed_hex": AGENT_SEED.hex(),
        "agent_public_key_b64": base64.b64encode(pub).decode(),
        "agent_key_id": kid,
        "rotated_seed_hex": ROTATED_SEED.hex(),
        "events": out,
    }


def jcs_vectors() -> dict[str, Any]:
    valid = [
        ('{"b":1,"a":2}', '{"a":2,"b":1}'),
        ('{ "a" : [ 1 , true , false , null ] }', '{"a":[1,true,false,null]}'),
        ('{"\\u00e9":1,"e":2}', '{"e":2,"\u00e9":1}'),
        ('{"\\ud83d\\ude00":1,"\\ufb01":2}', '{"\U0001f600":1,"\ufb01":2}'),
        ('"\\u001f\\u007f\\/"', '"\\u001f\x7f/"'),
        ("-9007199254740991", "-9007199254740991"),
        ('{"z":{"y":[],"x":{}}}', '{"z":{"x":{},"y":[]}}'),
    ]
    invalid = [
        ("1.0", "canonical.float"),
        ("1e3", "canonical.float"),
        ("9007199254740992", "canonical.integer"),
        ('{"a":1,"a":2}', "json.duplicate_key"),
        ("NaN", "json.syntax"),
        ('"\\ud800"', "canonical.string"),
        ("[" * 40 + "]" * 40, "canonical.depth"),
        ("\ufeff{}", "json.encoding"),
    ]
    return {
        "description": "RFC 8785 canonical forms for Engram's JSON subset (no floats, safe "
        "integers, unique keys, UTF-16 key order) and inputs that must be rejected.",
        "valid": [{"input": i, "canonical": c} for i, c in valid],
        "invalid": [{"input": i, "check": c} for i, c in invalid],
        "non_canonical": ['{"b":1,"a":2}', '{"a": 1}', '"\\u00e9"', "-0", '"\\/"'],
    }


def http_request_vectors() -> dict[str, Any]:
    """specs/http-api.md section 2, written out independently of ledger/httpauth.py."""
    import hashlib

    key = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96)))
    cases = []
    for method, target, signer, body in [
        ("GET", "/v1/agents/ada/memory?tier=HOT&status=active", "agent:ada", b""),
        ("POST", "/v1/agents/ada/recall", "agent:ada", b'{"query":"billing","limit":5}'),
        (
            "GET",
            "/v1/bundles?agent=ada&kind=pact.outcome",
            "ed25519:" + key.public_key().public_bytes_raw().hex(),
            b"",
        ),
    ]:
        origin, ts, nonce = "example.com/engram", 1790000000, "n0nce-0123456789abcdef"
        signed = (
            b"engram/http-request/v1\n"
            + "\n".join(
                [origin, method, target, signer, str(ts), nonce, hashlib.sha256(body).hexdigest()]
            ).encode()
            + b"\n"
        )
        cases.append(
            {
                "origin": origin,
                "method": method,
                "target": target,
                "signer": signer,
                "timestamp": ts,
                "nonce": nonce,
                "body": body.decode(),
                "signed_bytes": signed.decode(),
                "signature": base64.b64encode(key.sign(signed)).decode(),
            }
        )
    return {
        "description": "Signed HTTP requests (specs/http-api.md section 2): the exact signed bytes "
        "and the Ed25519 signature by the key with seed bytes 64..95.",
        "public_key": key.public_key().public_bytes_raw().hex(),
        "cases": cases,
    }


def oracle_vectors() -> dict[str, Any]:
    """A signed oracle statement (specs/oracle.md) by the fixed log key of checkpoint.json."""
    from verifier.oracle import AGENT_HEADER, oracle_text

    log = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    origin = "example.com/engram"
    root = bytes(range(32))
    payload = {"agent": "ada", "pacts": {"fulfilled": 2, "violated": 1, "undisclosed": 0}}
    text = oracle_text(AGENT_HEADER, origin, 5, root, payload)
    return {
        "description": "An oracle agent statement signed by the log key with seed bytes 0..31.",
        "vkey": format_verifier_key(origin, log.public_key().public_bytes_raw()),
        "text": text,
        "note": sign_note(text, origin, log).decode(),
    }


def distilled_vectors() -> dict[str, Any]:
    """Per-entry commitments of ``memory.distilled`` bodies (specs/event-envelope.md §3):
    a body, its entry digests, digest form and commitment, partial disclosures that open it,
    and bodies that must not (each with the check the verifier names)."""
    salt = bytes(range(16))
    session = {
        "session": "s-1",
        "input": {"start": 3, "end": 9, "digest": "ab" * 32},
        "distiller": {"name": "rules", "version": "1"},
    }
    entries = [
        {"category": "PREFERENCE", "content": "Prefers tea to coffee.", "confidence": 80},
        {"category": "LEARNING", "content": "Northwind prefers bond reports on Fridays.", "confidence": 70},
        {"category": "CONTEXT", "content": "Lives at 12 Harbour Lane.", "confidence": 90, "tags": ["home"]},
    ]
    nonces = [bytes([0x10 + n]) * 16 for n in range(len(entries))]
    body = {
        **session,
        "disclosure": "per-entry/v1",
        "entries": [{**e, "nonce": nonce.hex()} for e, nonce in zip(entries, nonces, strict=True)],
    }
    body_jcs = canonical_bytes(body)
    commitment = commitment_of("memory.distilled", salt, body_jcs)
    form = canonical_bytes(digest_form(body))

    def shown(keep: set[int]) -> str:
        return canonical_bytes(disclose_entries(body, keep)).decode()

    one = disclose_entries(body, {1})
    swapped = {**one, "entries": [one["entries"][2], one["entries"][1], one["entries"][0]]}
    altered = {
        **one,
        "entries": [one["entries"][0], {**one["entries"][1], "category": "CONTEXT"}, one["entries"][2]],
    }
    unmarked = {k: v for k, v in body.items() if k != "disclosure"}
    legacy = {**session, "entries": entries}
    legacy_jcs = canonical_bytes(legacy)
    legacy_commitment = body_commitment(salt, legacy_jcs)
    as_new = {**legacy, "disclosure": "per-entry/v1", "entries": body["entries"]}
    no_nonce = {**body, "entries": [entries[0], *body["entries"][1:]]}
    upper = {**one, "entries": [one["entries"][0].upper(), *one["entries"][1:]]}
    return {
        "description": (
            "memory.distilled bodies of the per-entry form: the commitment is SHA-256 over "
            "'engram/body-digest/v1' 0x00, the salt and JCS of the digest form (each entry "
            "replaced by hex SHA-256 over 'engram/distilled-entry/v1' 0x00 and the entry's JCS)."
        ),
        "kind": "memory.distilled",
        "salt_hex": salt.hex(),
        "body": body,
        "body_jcs": body_jcs.decode(),
        "entry_digests": [entry_digest(e) for e in body["entries"]],
        "digest_form_jcs": form.decode(),
        "commitment": commitment,
        # the same bytes under the whole-body rule: never the commitment
        "whole_body_commitment": body_commitment(salt, body_jcs),
        "digest_form_whole_body_commitment": body_commitment(salt, form),
        "disclosures": [
            {"disclosed": sorted(keep), "body_jcs": shown(keep)} for keep in ({1}, {0, 2}, set(), {0, 1, 2})
        ],
        "legacy": {"body_jcs": legacy_jcs.decode(), "commitment": legacy_commitment},
        "invalid": [
            {
                "name": "the marker removed (read by the whole-body rule)",
                "body_jcs": canonical_bytes(unmarked).decode(),
                "commitment": commitment,
                "check": "body.commitment",
            },
            {
                "name": "two undisclosed digests swapped",
                "body_jcs": canonical_bytes(swapped).decode(),
                "commitment": commitment,
                "check": "body.commitment",
            },
            {
                "name": "the disclosed entry altered",
                "body_jcs": canonical_bytes(altered).decode(),
                "commitment": commitment,
                "check": "body.commitment",
            },
            {
                "name": "a whole-body (old) distillation presented in the per-entry form",
                "body_jcs": canonical_bytes(as_new).decode(),
                "commitment": legacy_commitment,
                "check": "body.commitment",
            },
            {
                "name": "an unknown disclosure form",
                "body_jcs": canonical_bytes({**body, "disclosure": "per-entry/v2"}).decode(),
                "commitment": commitment,
                "check": "body.form",
            },
            {
                "name": "an entry without a nonce",
                "body_jcs": canonical_bytes(no_nonce).decode(),
                "commitment": commitment,
                "check": "body.form",
            },
            {
                "name": "an undisclosed entry that is not a lowercase hex digest",
                "body_jcs": canonical_bytes(upper).decode(),
                "commitment": commitment,
                "check": "body.form",
            },
            {
                "name": "an entry given as a number",
                "body_jcs": canonical_bytes({**one, "entries": [7, *one["entries"][1:]]}).decode(),
                "commitment": commitment,
                "check": "body.form",
            },
            {
                "name": "no list of entries",
                "body_jcs": canonical_bytes({**body, "entries": {}}).decode(),
                "commitment": commitment,
                "check": "body.form",
            },
        ],
    }


def all_vectors() -> dict[str, dict[str, Any]]:
    return {
        "merkle.json": merkle_vectors(),
        "checkpoint.json": note_vectors(),
        "event.json": event_vectors(),
        "jcs.json": jcs_vectors(),
        "http-request.json": http_request_vectors(),
        "oracle.json": oracle_vectors(),
        "distilled.json": distilled_vectors(),
    }


def render(obj: dict[str, Any]) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, obj in all_vectors().items():
        (OUT / name).write_text(render(obj), encoding="utf-8")
        print(f"wrote {OUT / name}")
