"""Redaction of secrets in the forms people paste (issue 40, finding 6): vendor tokens, key
material and configuration the detector used to sign in clear, a token wrapped over two
lines, a password told in a sentence, high-entropy tokens next to a word that says secret,
and the encodings an outsider would try (base64, URL and JSON escapes, look-alike letters,
invisible characters). Ordinary prose, chat and code stay untouched: the false-positive rate
on a fixed corpus committed with the tests is held under a threshold.

The forms live in tests/fixtures/secrets/corpus.json (fake values, one per form);
tests/unit/test_redaction_corpus.py runs every one of them through the detector."""

from __future__ import annotations

import base64
import json
import lzma
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.protocol.gate import GateRejection, WriteGate
from engram.protocol.redact import count_redactions, find_secret, redact_body, redact_secrets
from engram.protocol.secret_rules import OUR_RULES, library_rules

ROOT = Path(__file__).resolve().parents[2]
CORPUS: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "fixtures" / "secrets" / "corpus.json").read_text(encoding="utf-8")
)
ORDINARY: dict[str, list[str]] = json.loads(
    lzma.decompress((ROOT / "tests" / "fixtures" / "secrets" / "ordinary.json.xz").read_bytes())
)
#: The forms issue 40 names, by the corpus's form names (each was signed in clear before).
FORMS_ONCE_SIGNED_IN_CLEAR = [
    "Vault service token (hvs.)",
    "DigitalOcean personal access token",
    "Shopify Admin API access token",
    "Databricks personal access token",
    "Grafana service account token",
    "Atlassian API token",
    "age secret key",
    "Slack app-level token (xapp-)",
    "Postman API key",
    "Linear API key",
    "Doppler service token",
    "New Relic user API key",
    "kubeconfig client-key-data",
    "docker config.json auth",
    "OpenSSH private key body inside JSON",
    ".netrc single line",
    ".pgpass line",
    "mysql -p",
    "sshpass -p",
    "Azure SAS sig=",
    "Cookie: sessionid=",
    "AWS credentials.csv (access keys)",
    "PuTTY .ppk (v2)",
    "PEM without BEGIN line (RSA, with END)",
    "GitHub token wrapped over two lines",
    "prose: prod DB password",
]
BY_FORM = {c["form"]: c for c in CORPUS}


def _secrets(case: dict[str, Any]) -> list[str]:
    return case["secret"] if isinstance(case["secret"], list) else [case["secret"]]


def _clean(text: str, secrets: list[str]) -> None:
    out, found = redact_secrets(text)
    assert found
    for s in secrets:
        assert s not in out
    assert find_secret(out) is None and redact_secrets(out) == (out, [])


@pytest.mark.parametrize("form", FORMS_ONCE_SIGNED_IN_CLEAR)
def test_each_form_the_issue_names_is_redacted_and_refused_unredacted(form: str) -> None:
    """Issue 40, finding 6: each of these was signed in clear; now the signer redacts it and
    the log refuses a body that still carries it (the same detector on both sides)."""
    case = BY_FORM[form]
    _clean(case["text"], _secrets(case))
    with pytest.raises(GateRejection) as e:
        WriteGate.check_body_secrets({"content": case["text"]})
    assert e.value.check == "gate.secret"


@pytest.mark.parametrize(
    "text",
    [
        "export GH_PAT=\nghp_7Hd8Kq2mPz9RtV4wLs8N\nbY3cJdQe5fGh6iJk7lMn8\n",
        "token: ghp_7Hd8Kq2mPz9RtV4wLs8N\n       bY3cJdQe5fGh6iJk7lMn8",
        "> key: ghp_7Hd8Kq2mPz9RtV4wLs8N\n> bY3cJdQe5fGh6iJk7lMn8\n> thanks",
        '{"note": "ghp_7Hd8Kq2mPz9RtV4wLs8N\\nbY3cJdQe5fGh6iJk7lMn8"}',
        "ghp_7Hd8Kq2mPz9RtV4wLs8N\u00adbY3cJdQe5fGh6iJk7lMn8",
        "ghp_7Hd8Kq2mPz9RtV4wLs8N\u200bbY3cJdQe5fGh6iJk7lMn8",
    ],
    ids=["line", "indented", "mail-quote", "json-escaped", "soft-hyphen", "zero-width"],
)
def test_a_token_wrapped_over_two_lines_is_found(text: str) -> None:
    """Issue 40, finding 6: a token split by a line break (a terminal, a mail quote, an
    escaped newline) or an invisible character is found whole; neither half survives."""
    _clean(text, ["ghp_7Hd8Kq2mPz9RtV4wLs8N", "bY3cJdQe5fGh6iJk7lMn8"])


def test_wrapped_ordinary_text_gains_no_finding() -> None:
    """Joining wrapped lines never turns ordinary prose into a finding: every turn of the
    fixed chat corpus, hard-wrapped at 40 and 80 columns and word-wrapped at 60, redacts
    exactly as the turn itself."""
    for turn in ORDINARY["chat"][:600]:
        base = sorted(redact_secrets(turn)[1])
        for width in (40, 80):
            hard = "\n".join(
                line[i : i + width] for line in turn.split("\n") for i in range(0, len(line), width)
            )
            assert sorted(redact_secrets(hard)[1]) == base, hard[:200]
        soft = "\n".join(textwrap.fill(p, 60) for p in turn.split("\n"))
        assert sorted(redact_secrets(soft)[1]) == base, soft[:200]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("The prod DB password is hunter2-SECRET-key.", "hunter2-SECRET-key"),
        ("fyi my password is Tr0ub4dor&3 if you need it", "Tr0ub4dor&3"),
        ("I changed the root password to Summer2024! yesterday", "Summer2024"),
        ("the door PIN is 482913, don't share it", "482913"),
        ('The office wifi password is "correct horse battery" now.', "correct horse battery"),
        ("Use the passphrase `glass-ocean-27-rivet` to unlock the backup.", "glass-ocean-27-rivet"),
        ("the admin password's Winter#2025 until IT resets it", "Winter#2025"),
        ("vpn user jdoe pw Kx8#pLm2", "Kx8#pLm2"),
        ("login: admin / password: Adm1n!2024", "Adm1n!2024"),
        ("le mot de passe est Soleil2024!", "Soleil2024"),
        ("Das Passwort ist Hund2023#", "Hund2023#"),
        ("パスワードは Sakura2024x です", "Sakura2024x"),
        ("the API key for staging is 9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c", "9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"),
    ],
)
def test_a_password_told_in_prose_is_found(text: str, secret: str) -> None:
    """Issue 40, finding 6: "The prod DB password is hunter2-SECRET-key." was signed
    verbatim."""
    _clean(text, [secret])


@pytest.mark.parametrize(
    "text",
    [
        "the password is stored in the vault",
        "the password is case-sensitive",
        'the password "field" is required',
        "the password is at least 12 characters long",
        "Reset your password: open Settings, then Security.",
        "my password manager is 1Password",
        "The token is valid for 30 days.",
        "the key is to practise every day",
        "the secret is out",
        "max tokens is 4096 for this model",
        'here is a secret: "grant agency staff hate grant writers," said the boss',
        "Username and Password: enter the admin credentials printed on the router",
        "I forgot my password again, can you help me reset it?",
    ],
)
def test_prose_about_passwords_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("here's the token: x7Kq2mPz9RtV4wLs8NbY, it expires Friday", "x7Kq2mPz9RtV4wLs8NbY"),
        ("secret 4f9a1c7e2b8d6f3a9c0e", "4f9a1c7e2b8d6f3a9c0e"),
        ("auth = Zk3vQ9wR7tY2uI5oP1aS4dF6", "Zk3vQ9wR7tY2uI5oP1aS4dF6"),
        ("  signing key -> kS8dJ2nB5vX9cM1zQ4wE7rT0", "kS8dJ2nB5vX9cM1zQ4wE7rT0"),
    ],
)
def test_a_high_entropy_token_beside_a_secret_word_is_found(text: str, secret: str) -> None:
    """Issue 40, Deliver 5: entropy plus context, in prose or configuration."""
    _clean(text, [secret])


@pytest.mark.parametrize(
    "text",
    [
        "public key 3f2a9c0e4b7d1a8e6c5f0b9d2e7a4c1f",
        "commit key fix: 9c0e4b7d1a8e6c5f0b9d2e7a4c1f3f2a4b7d",
        "the session key 123e4567-e89b-12d3-a456-426614174000 is a uuid",
        "sha256 key e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "private_key: Ed25519PrivateKey,",
        "key = b64decode_strict(o['key'])",
        "the token getAccessTokenForUser returns",
        "Print the key (name+keyid+base64 key).",
        "cache key user_profile_v2_12345",
    ],
)
def test_identifiers_digests_and_ids_beside_a_secret_word_are_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


@pytest.mark.parametrize(
    "form", ["Mailchimp API key", "Artifactory API key", "Discord bot token"], ids=lambda f: f.split()[0]
)
def test_the_maintained_library_finds_what_our_own_rules_do_not(form: str) -> None:
    """The library is at the core: these forms are found by bc-detect-secrets' detectors
    alone (our rules lack them), through the same views and markers as ours."""
    case = BY_FORM[form]
    text = case["text"]
    ours = [r for r in OUR_RULES if r.may_match(text, text.lower()) and any(True for _ in r.find(text))]
    assert ours == [], [r.name for r in ours]
    assert any(True for r in library_rules() for _ in r.find(text))
    _clean(text, _secrets(case))


@pytest.mark.parametrize("case", [c for c in CORPUS if c["family"] == "encoding"], ids=lambda c: c["form"])
def test_an_encoded_secret_is_found(case: dict[str, Any]) -> None:
    """Outside view: base64, URL encoding, JSON-escaped strings inside JSON, fullwidth and
    Cyrillic look-alike letters do not carry a secret past the detector."""
    _clean(case["text"], _secrets(case))


def test_a_field_named_for_a_secret_is_redacted_whole() -> None:
    """A tool's arguments ({"password": "..."}): the value alone says nothing, its key does."""
    body = {
        "tool": {
            "name": "db_connect",
            "input": {"host": "db", "password": "correct horse", "api_token": "Zk3vQ9wR7tY2uI5o"},
        },
        "stats": {"tokens": "estimated"},
    }
    out = redact_body(body)
    assert out["tool"]["input"] == {
        "host": "db",
        "password": "[REDACTED:assigned_secret]",
        "api_token": "[REDACTED:assigned_secret]",
    }
    assert out["stats"] == {"tokens": "estimated"}
    found = find_secret(body)
    assert found is not None and found.path == "$.tool.input.password"
    assert find_secret(out) is None
    assert count_redactions(out) == 2


def test_a_marker_never_triggers_the_write_gate() -> None:
    """ "[REDACTED:github_token]" names a rule, not a token: the gate that accepted the text
    before redaction accepts it after (and the log, which scans stored text, agrees)."""
    text = "curl https://ci.example.com/hook --data 'build=ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk'"
    WriteGate().scan(text)
    out, found = redact_secrets(text)
    assert found == ["github_token"]
    WriteGate().scan(out)
    WriteGate().check_stored([out])
    for case in CORPUS:
        try:
            WriteGate().scan(case["text"])
        except GateRejection:
            continue
        WriteGate().scan(redact_secrets(case["text"])[0])


def test_the_answer_counts_markers_added_not_markers_given() -> None:
    given = "see [REDACTED:github_token] from last week; new one ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk"
    out, found = redact_secrets(given)
    assert found == ["github_token"]
    assert count_redactions(out) - count_redactions(given) == 1


_FRAGMENT = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), max_size=60)


def _encode(text: str, how: str) -> str:
    if how == "base64":
        return base64.b64encode(text.encode()).decode()
    if how == "json":
        return json.dumps({"v": text})
    if how == "wrap":
        return "\n".join(text[i : i + 50] for i in range(0, len(text), 50))
    return text


@settings(max_examples=120, deadline=None)
@given(
    before=_FRAGMENT,
    after=_FRAGMENT,
    case=st.sampled_from(CORPUS),
    how=st.sampled_from(["plain", "base64", "json", "wrap"]),
)
def test_redaction_is_a_fixed_point_the_log_accepts(
    before: str, after: str, case: dict[str, Any], how: str
) -> None:
    """Whatever surrounds or encodes a secret, redacting twice changes nothing more, the log
    accepts what the signer produced, and find_secret agrees with redaction."""
    text = f"{before} {_encode(case['text'], how)} {after}"
    out, found = redact_secrets(text)
    assert redact_secrets(out) == (out, [])
    assert find_secret({"t": out}) is None
    assert (find_secret({"t": text}) is None) == (not found)


#: The fixed ordinary corpus (tests/fixtures/secrets/ordinary.json.xz): what redaction may
#: touch at most, per corpus (measured when it was built: 0 of 2,000 chat turns, 2 of 33,575
#: code lines, both credential-shaped test constants of this repository; 0 of 1,851 prose
#: lines). A rule that starts firing on ordinary text fails here.
FP_LIMITS = {"chat": 0, "code": 3, "prose": 0}


@pytest.mark.parametrize("corpus", sorted(FP_LIMITS))
def test_ordinary_prose_chat_and_code_stay_untouched(corpus: str) -> None:
    """Issue 40, Deliver 5: false positives on ordinary text, asserted on a fixed corpus
    (LongMemEval turns, this repository's docs and source; docs/privacy.md has the full
    measurement)."""
    hits = [(t[:120], f) for t in ORDINARY[corpus] for f in [redact_secrets(t)[1]] if f]
    assert len(ORDINARY[corpus]) > 1000
    assert len(hits) <= FP_LIMITS[corpus], hits


def test_a_token_cannot_hide_in_a_tag() -> None:
    """Outside view: tags are at most 32 lower-case characters (the schema), too short and
    too plain for a token; one that holds a token's shape is refused before anything is
    signed."""
    from engram.protocol.bodies import written_body
    from engram.protocol.errors import RejectedEventError

    with pytest.raises(RejectedEventError) as e:
        written_body(
            WriteGate(), category="LEARNING", content="x", tags=["ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk"]
        )
    assert e.value.check == "body.memory.written.tags"


def test_adversarial_inputs_stay_linear() -> None:
    """Outside view: the largest body the log takes (about 75 KB of text in one string),
    shaped against the rules, is redacted in bounded time (each rule is linear; a slow
    machine has room)."""
    import time

    n = 75_000
    for text in (
        "password=" * (n // 9),
        "key x7Kq2mPz9RtV4wLs8NbY " * (n // 26),
        "ab\\n" * (n // 4),
        ("Ab3+" * 16 + "\n") * (n // 65),
        "a\u200b" * (n // 2),
        "%41" * (n // 3),
    ):
        start = time.perf_counter()
        out, _ = redact_secrets(text)
        assert time.perf_counter() - start < 10
        assert find_secret({"t": out}) is None


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "already handled: [REDACTED:dapi5e2f0a9c4b7d18e63f2a0c9b5d7e41f8]",
            "dapi5e2f0a9c4b7d18e63f2a0c9b5d7e41f8",
        ),
        ("DB_PASSWORD=[REDACTED:Rk7pW2xQ9v]", "Rk7pW2xQ9v"),
        (
            "[REDACTED:notes ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk ]",
            "ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk",
        ),
    ],
)
def test_a_secret_dressed_as_a_marker_is_still_redacted(text: str, secret: str) -> None:
    """Outside view: a marker is recognised only when it names a rule, so wrapping a secret
    in "[REDACTED:...]" does not carry it past the detector (nor into the answer's count)."""
    _clean(text, [secret])
    assert count_redactions(text) == 0
