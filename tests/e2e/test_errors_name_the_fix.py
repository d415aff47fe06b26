"""Issue 44, finding 4: the mistakes a newcomer makes get one line that names what is wrong and
the fix, each check name once. Before: a ``--server`` URL with a path said ``[not_found] Not
Found``, another web server ``HTTP 404``, erasing a missing entry ``[proof.index] [proof.index]
index 99999 is not below size 40``, a URL serving another log ``[auth.signer] [auth.signer]
agent claude has no active key in this log``, a forgotten ``--server`` ``key ... is not
registered in this log`` (which log?), a refused share token ``[token.signature]
[token.signature] ...``, and a missing key file did not say how to make one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM, free_port, listening


@dataclass(frozen=True)
class Setup:
    url: str  # the service of log A, where claude is registered
    other: str  # the service of log B, where claude is not
    plain: str  # a web server that is not Engram
    key: Path  # claude's key file
    home_a: Path
    home_b: Path
    env: dict[str, str]  # a client's environment: no ENGRAM_HOME of its own


def _run(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("errors")
    base = {**os.environ, "ENGRAM_EMBEDDER": "off", "ENGRAM_DEV_MODE": "1", "COLUMNS": "400"}
    for name in ("ENGRAM_DATABASE_URL", "ENGRAM_URL", "ENGRAM_KEY_FILE", "ENGRAM_LOG_KEY"):
        base.pop(name, None)
    a = {**base, "ENGRAM_HOME": str(tmp / "a")}
    b = {**base, "ENGRAM_HOME": str(tmp / "b")}
    assert _run(a, "init", "--origin", "first.example/log").returncode == 0
    assert _run(b, "init", "--origin", "second.example/log").returncode == 0
    key = tmp / "claude.key"
    assert _run(a, "agent", "create", "claude", "--key-file", str(key)).returncode == 0
    ports = free_port(), free_port(), free_port()
    client = {**base, "ENGRAM_HOME": str(tmp / "client"), "ENGRAM_VERIFIER_STATE": str(tmp / "state")}
    with ExitStack() as stack:
        stack.enter_context(listening([ENGRAM, "serve", "--port", str(ports[0])], a, ports[0], what="log A"))
        stack.enter_context(listening([ENGRAM, "serve", "--port", str(ports[1])], b, ports[1], what="log B"))
        stack.enter_context(
            listening(
                [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(ports[2])],
                {**base},
                ports[2],
                what="a plain web server",
            )
        )
        yield Setup(
            url=f"http://127.0.0.1:{ports[0]}",
            other=f"http://127.0.0.1:{ports[1]}",
            plain=f"http://127.0.0.1:{ports[2]}",
            key=key,
            home_a=tmp / "a",
            home_b=tmp / "b",
            env=client,
        )


def _one_error(run: subprocess.CompletedProcess[str]) -> str:
    """The command failed with one error line, no traceback, and no check name twice."""
    assert run.returncode != 0, run.stdout
    err = run.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    checks = re.findall(r"\[[a-z_]+(?:\.[a-z_]+)+\]|\[not_found\]", err)
    assert len(checks) == len(set(checks)), err
    return err


def test_a_server_url_with_a_path_names_the_root_url(setup: Setup) -> None:
    err = _one_error(
        _run(setup.env, "memory", "recall", "--server", setup.url + "/v1", "--key-file", str(setup.key), "x")
    )
    assert f"no Engram service at {setup.url}/v1" in err
    assert f"without the path /v1: {setup.url} " in err and "[not_found]" not in err


def test_another_web_server_is_named_as_not_engram(setup: Setup) -> None:
    err = _one_error(
        _run(setup.env, "memory", "recall", "--server", setup.plain, "--key-file", str(setup.key), "x")
    )
    assert f"no Engram service at {setup.plain}" in err and "HTTP 404" in err
    assert "check the host and port" in err


def test_erasing_a_missing_entry_says_which_entries_exist(setup: Setup) -> None:
    err = _one_error(
        _run(
            setup.env,
            "memory",
            "erase",
            "--server",
            setup.url,
            "--key-file",
            str(setup.key),
            "--index",
            "99999",
            "--reason",
            "r",
        )
    )
    assert (
        "[memory.erase_index] cannot erase entry 99999: the log has no entry 99999 (its entries are 0 to"
        in err
    )
    assert "engram memory recall --json" in err and "[proof.index]" not in err


def test_a_url_serving_another_log_names_it_and_the_fix(setup: Setup) -> None:
    err = _one_error(
        _run(setup.env, "memory", "recall", "--server", setup.other, "--key-file", str(setup.key), "x")
    )
    assert err.count("[auth.signer]") == 1, err
    assert "agent claude has no active key in the log second.example/log served here" in err
    assert "point --server / ENGRAM_URL at the service the agent was registered on" in err


def test_a_forgotten_server_names_the_log_it_opened_and_suggests_server(setup: Setup) -> None:
    in_b = {**setup.env, "ENGRAM_HOME": str(setup.home_b)}
    err = _one_error(
        _run(in_b, "memory", "write", "--key-file", str(setup.key), "--category", "CONTEXT", "--content", "q")
    )
    assert "is not registered in the embedded log second.example/log" in err
    assert f"ENGRAM_HOME={setup.home_b}" in err and "--server URL or export ENGRAM_URL" in err
    nothing = _one_error(
        _run(
            setup.env,
            "memory",
            "write",
            "--key-file",
            str(setup.key),
            "--category",
            "CONTEXT",
            "--content",
            "q",
        )
    )
    assert "no --server / ENGRAM_URL, and no embedded log at" in nothing and "engram init" in nothing


def test_a_missing_key_file_suggests_engram_agent_create(setup: Setup, tmp_path: Path) -> None:
    gone = tmp_path / "nobody.key"
    env = {**setup.env, "ENGRAM_HOME": str(setup.home_a)}
    write = ("memory", "write", "--key-file", str(gone), "--category", "CONTEXT", "--content", "q")
    for target in (("--server", setup.url), ()):  # on a service, and on the embedded log
        err = _one_error(_run(env, *write, *target))
        assert f"no agent key file at {gone}" in err
        assert f"engram agent create AGENT --key-file {gone}" in err


def test_a_refused_share_token_prints_its_check_once(setup: Setup) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from engram.client.http import Buyer, HttpTransport
    from engram.protocol.httpsign import audience_for_key
    from verifier.errors import VerificationError
    from verifier.token import mint

    log_key = _run({**setup.env, "ENGRAM_HOME": str(setup.home_a)}, "log", "key").stdout.strip()
    buyer_key = Ed25519PrivateKey.generate()
    audience = audience_for_key(buyer_key.public_key().public_bytes_raw())
    forged = mint(  # signed by a key that is not claude's
        seed=Ed25519PrivateKey.generate().private_bytes_raw(),
        origin="first.example/log",
        agent="claude",
        audience=audience,
        kinds=["pact.outcome"],
        expires=4_000_000_000,
    )
    buyer = Buyer(HttpTransport(setup.url), log_vkey=log_key, audience_key=buyer_key, state_dir=None)
    with pytest.raises(VerificationError) as raised:
        buyer.bundle(forged, agent="claude", kinds=["pact.outcome"])
    assert str(raised.value).count(f"[{raised.value.check}]") == 1, str(raised.value)


def test_flags_override_the_environment_and_the_environment_reaches_every_agent_command(setup: Setup) -> None:
    """Issue 44, the README's exports: ENGRAM_URL and ENGRAM_KEY_FILE reach every agent command
    (``memory exempt`` and ``token revoke`` acted on the embedded log only), and ``--server``
    / ``--key-file`` given on a command line win over them."""
    wrong = {**setup.env, "ENGRAM_URL": setup.plain, "ENGRAM_KEY_FILE": str(setup.key) + ".missing"}
    flags = _run(
        wrong,
        *("memory", "write", "--server", setup.url, "--key-file", str(setup.key)),
        *("--category", "CONTEXT", "--content", "The flags win."),
    )
    assert flags.returncode == 0 and "written as ref" in flags.stdout, flags.stderr
    env = {**setup.env, "ENGRAM_URL": setup.url, "ENGRAM_KEY_FILE": str(setup.key)}
    ref = re.search(r"ref (\d+\.\d+)", flags.stdout)
    assert ref is not None
    exempt = _run(env, "memory", "exempt", "--ref", ref.group(1), "--reason", "keep it")
    assert exempt.returncode == 0 and "exempt from decay" in exempt.stdout, exempt.stderr
    token = _run(env, "token", "mint", "--audience", "buyer", "--kind", "pact.outcome")
    assert token.returncode == 0, token.stderr
    revoked = _run(env, "token", "revoke", token.stdout.strip())
    assert revoked.returncode == 0 and "revoked token" in revoked.stdout, revoked.stderr


def test_one_pin_for_the_spellings_of_one_service_url(setup: Setup) -> None:
    """Issue 44, finding 5: each spelling of one URL pinned (and trusted) a key of its own."""
    env = {**setup.env, "ENGRAM_VERIFIER_STATE": str(setup.home_a.parent / "pins")}
    first = _run(env, "memory", "recall", "--server", setup.url, "--key-file", str(setup.key), "x")
    assert first.returncode == 0, first.stderr
    for spelling in (setup.url + "/", setup.url.replace("http://", "HTTP://")):
        shown = _run(env, "log", "pin", "--server", spelling)
        assert shown.returncode == 0 and "pinned for" in shown.stdout, shown.stderr
    assert len(list((setup.home_a.parent / "pins" / "log-keys").iterdir())) == 1
