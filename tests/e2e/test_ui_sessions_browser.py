"""Issue 40, finding 9, in a real browser (Debian's chromium through Playwright) against
``engram serve --workers 2`` on both backends, its access log captured as an operator keeps it:

* the recall playground sends its question in a POST body: the question (a health detail and
  an API key) appears in no line the service wrote, while the POST itself is logged;
* "Sign out" ends the session on the service: a copy of the cookie, replayed from another
  browser context (fresh connections, spread over both workers), opens nothing afterwards;
* a page of another site that posts to the playground or to "Sign out" gets nothing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import ENGRAM, free_port
from tests.e2e.test_cli import cli_db  # noqa: F401  (a fixture: both backends)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
QUESTION = "Does my HIV test from March matter? Is sk_live_4eC39HqLyjWDarjtT1zdp7dc still my key?"
SECRET_WORDS = ("HIV", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", "March")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="no chromium here (.ci/install-interop.sh)"
)


def _run(env: dict[str, str], *args: str) -> str:
    p = subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@contextmanager
def _serve(env: dict[str, str], log: Path) -> Iterator[str]:
    """``engram serve --workers 2``, everything it prints (its access log) into ``log``."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [ENGRAM, "serve", "--port", str(port), "--workers", "2"], env=env, stdout=out, stderr=out
        )
        try:
            for _ in range(300):
                assert proc.poll() is None, log.read_text()
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_sign_out_and_the_playground_in_a_real_browser_against_two_workers(
    tmp_path: Path,
    cli_db: str | None,  # noqa: F811
) -> None:
    assert CHROMIUM is not None, "CI installs Debian's chromium (.ci/install-interop.sh)"
    from playwright.sync_api import sync_playwright

    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_DEV_MODE": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    if cli_db is not None:
        env["ENGRAM_DATABASE_URL"] = cli_db
    _run(env, "init", "--origin", "example.com/engram-ui-sessions")
    key = tmp_path / "claude.key"
    _run(env, "agent", "create", "claude", "--key-file", str(key))
    access_log = tmp_path / "engram-serve.log"

    with _serve(env, access_log) as url, sync_playwright() as pw:
        s = ["--server", url, "--key-file", str(key)]
        _run(
            env,
            "memory",
            "write",
            *s,
            "--category",
            "PREFERENCE",
            "--content",
            "The user wants short answers",
        )
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            owner = browser.new_context()
            page = owner.new_page()
            methods: list[tuple[str, str]] = []
            page.on("request", lambda r: methods.append((r.method, r.url)))
            page.goto(_run(env, "ui", *s).strip().splitlines()[-1])
            page.wait_for_selector('h1:has-text("claude\'s memory")')
            page.fill("#recall-q", QUESTION)
            page.click("button:has-text('Recall')")
            assert page.inner_text("#recall-block").startswith("<memory-context")
            assert ("POST", url + "/ui/agents/claude/memory") in methods
            assert not [u for m, u in methods if "HIV" in u or "sk_live" in u]  # never in a URL
            (cookie,) = [c for c in owner.cookies() if c["name"] == "engram_ui"]

            # a copy of the cookie in another browser opens the view (both workers answer)
            thief = browser.new_context()
            thief.add_cookies([cookie])
            stolen = thief.new_page()
            stolen.goto(url + "/ui/agents/claude/memory?tier=HOT")
            assert "short answers" in stolen.inner_text("main")
            copied = {"engram_ui": cookie["value"]}
            for _ in range(12):  # fresh connections: the kernel spreads them over the workers
                with httpx.Client(cookies=copied) as c:
                    assert c.get(url + "/ui/agents/claude/memory").status_code == 200

            # a page of another site posting to the playground or signing the owner out gets
            # nothing (the cookie is SameSite=Strict, and the service checks the origin)
            evil = tmp_path / "evil.html"
            evil.write_text(
                f'<form id="f" method="post" action="{url}/ui/agents/claude/memory">'
                '<input name="q" value="what does the user want?"><input name="tier" value="HOT"></form>'
                f'<form id="g" method="post" action="{url}/ui/logout"></form>'
            )
            other = owner.new_page()
            other.goto(evil.as_uri())
            with other.expect_navigation():
                other.eval_on_selector("#f", "f => f.submit()")
            assert "short answers" not in other.content() and "recall-block" not in other.content()
            other.goto(evil.as_uri())
            with other.expect_navigation():
                other.eval_on_selector("#g", "g => g.submit()")
            with httpx.Client(cookies=copied) as c:
                assert c.get(url + "/ui/agents/claude/memory").status_code == 200  # still signed in

            # the owner signs out: the copy opens nothing any more, on any worker
            page.click("button:has-text('Sign out')")
            page.wait_for_url(url + "/ui")
            stolen.goto(url + "/ui/agents/claude/memory?tier=HOT")
            assert "needs the agent's authority" in stolen.inner_text("main")
            assert "short answers" not in stolen.content()
            for _ in range(12):
                with httpx.Client(cookies=copied) as c:
                    assert c.get(url + "/ui/agents/claude/memory").status_code == 401
        finally:
            browser.close()
    log = access_log.read_text(errors="replace")
    assert "POST /ui/agents/claude/memory" in log and "POST /ui/logout" in log  # the access log is on
    assert not [w for w in SECRET_WORDS if w in log], [w for w in SECRET_WORDS if w in log]
