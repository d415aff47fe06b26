"""Issue 31, Deliver 3: the web UI in a real browser (Debian's chromium driven by Playwright;
nothing downloads a browser), against a live ``engram serve`` on both backends.

The newcomer's path of the README: open the explorer (the checkpoint's signature checked in
the browser), find an agent, see its plots, open an entry whose inclusion proof the browser
verifies (and fails when the proof is tampered with in flight), verify a bundle in the
browser with the same numbered checks and check names as ``engram-verify bundle --json``
(honest: VERIFIED; tampered: the same first failed check), and look at its own agent's
memory through ``engram ui`` (refused without the agent's authority). Every request the
pages make stays on the service: nothing loads from a CDN.

Issue 44, Deliver 3 and 6: the demo's log has a history (sessions over its simulated weeks:
plots with many days and weeks, a growing log, the main agent's coverage above zero), and the
commands the demo prints open it in the UI; the pages pass a newcomer's look at 1280x900 and
at 390 px (the bundle verdict brought into view, ids in headings as large as the heading,
ratios as percentages with their counts, x labels inside the plot and whole-number ticks,
pact and eval outcomes in separate weekly bars, no horizontal scroll, the owner view on HOT,
empty states naming the next step, a favicon, and HTML error pages for the UI's bad input).

With ``ENGRAM_UI_SCREENSHOTS=DIR`` the test also writes the screenshots docs/ui.md shows.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.e2e.processes import ENGRAM, engram_serve, free_port, listening
from tests.e2e.test_cli import cli_db  # noqa: F401  (a fixture: both backends)
from verifier.note import format_verifier_key
from verifier.witness import _format_vkey

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VERIFY = str(Path(ENGRAM).parent / "engram-verify")
SHOTS = os.environ.get("ENGRAM_UI_SCREENSHOTS")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="no chromium here (.ci/install-interop.sh)"
)


def _run(env: dict[str, str], *args: str) -> str:
    p = subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _cli_report(path: Path, vkey: str, *extra: str) -> dict[str, Any]:
    p = subprocess.run(
        [VERIFY, "bundle", str(path), "--log-key", vkey, "--json", *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode in (0, 1), p.stderr
    report: dict[str, Any] = json.loads(p.stdout)
    return report


def _shape(checks: list[dict[str, Any]]) -> list[tuple[str, bool, str | None]]:
    return [(c["check"], c["ok"], c.get("failed_check")) for c in checks]


def _tampered(bundle: dict[str, Any]) -> dict[str, Callable[[dict[str, Any]], Any]]:
    def flip_leaf(b: dict[str, Any]) -> None:
        raw = bytearray(base64.b64decode(b["entries"][-1]["leaf"]))
        raw[len(raw) // 2] ^= 0x01
        b["entries"][-1]["leaf"] = base64.b64encode(bytes(raw)).decode()

    def flip_proof(b: dict[str, Any]) -> None:
        proofs = [e for e in b["entries"] if e["proof"]]
        raw = bytearray(base64.b64decode(proofs[0]["proof"][0]))
        raw[0] ^= 0x80
        proofs[0]["proof"][0] = base64.b64encode(bytes(raw)).decode()

    def inflate_claim(b: dict[str, Any]) -> None:
        b["claim"]["statements"][0]["value"] += 1

    def drop_entry(b: dict[str, Any]) -> None:
        b["entries"].pop()

    def flip_heads_signature(b: dict[str, Any]) -> None:
        note = b["stream_heads"]
        b["stream_heads"] = note[:-6] + ("A" if note[-6] != "A" else "B") + note[-5:]

    def change_body(b: dict[str, Any]) -> None:
        withbody = [e for e in b["entries"] if e.get("body")]
        body = json.loads(base64.b64decode(withbody[0]["body"]))
        body["quality"] = 100
        withbody[0]["body"] = base64.b64encode(
            json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        ).decode()

    return {
        "leaf": flip_leaf,
        "proof": flip_proof,
        "claim": inflate_claim,
        "dropped": drop_entry,
        "heads": flip_heads_signature,
        "body": change_body,
    }


_A11Y = """() => {
  const bad = [];
  if (!document.documentElement.lang) bad.push("no lang");
  if (document.querySelectorAll("h1").length !== 1) bad.push("not one h1");
  if (!document.querySelector("main")) bad.push("no main landmark");
  for (const el of document.querySelectorAll("input:not([type=hidden]), textarea, select")) {
    if (!(el.labels && el.labels.length) && !el.getAttribute("aria-label")) bad.push("unlabelled " + (el.id || el.name));
  }
  for (const svg of document.querySelectorAll("svg")) {
    if (svg.getAttribute("role") !== "img" || !svg.querySelector("title")) bad.push("svg without role/title");
  }
  for (const b of document.querySelectorAll("button, a")) {
    if (!b.textContent.trim() && !b.getAttribute("aria-label")) bad.push("nameless " + b.tagName);
  }
  return bad;
}"""


def _accessible(page: Any) -> None:
    """The basics a screen reader needs: a language, one h1, a main landmark, a label on every
    control, a role and title on every plot, a name on every link and button."""
    bad = page.evaluate(_A11Y)
    assert not bad, (page.url, bad)


_PLOT_LABELS = """svg => {
  const width = svg.viewBox.baseVal.width;
  return {
    x: [...svg.querySelectorAll("text.tick-x")].map(t => { const b = t.getBBox(); return [t.textContent, b.x, b.x + b.width, width]; }),
    y: [...svg.querySelectorAll("text.tick-y")].map(t => t.textContent),
  };
}"""


def _plots_read_whole(page: Any) -> None:
    """Every plot's x labels lie inside the plot (none clipped at an edge); the count plots'
    y ticks are whole numbers (1k / 2M: whole thousands, millions)."""
    for svg in page.locator("svg.plot").all():
        labels = svg.evaluate(_PLOT_LABELS)
        assert labels["x"], labels
        for text, left, right, width in labels["x"]:
            assert left >= 0 and right <= width, (text, left, right, width)
        title = svg.locator("title").first.text_content() or ""
        if title != "Quality by month":  # counts: entries, outcomes
            for tick in labels["y"]:
                assert re.fullmatch(r"\d+[kM]?", tick), (title, labels["y"])


_WIDER_THAN_THE_PAGE = """() => {
  const w = document.documentElement.clientWidth;
  return [document.documentElement.scrollWidth, w, [...document.querySelectorAll("body *")]
    .filter(e => e.getBoundingClientRect().right > w + 1)
    .slice(0, 5).map(e => e.tagName + "." + e.className + ": " + (e.textContent || "").slice(0, 60))];
}"""


def _fits_the_width(page: Any) -> None:
    """No horizontal scroll: nothing on the page is wider than the window."""
    scroll, width, wider = page.evaluate(_WIDER_THAN_THE_PAGE)
    assert scroll <= width, (page.url, scroll, width, wider)


def _demo_ui_commands(out: str) -> tuple[dict[str, str], list[str], list[str]]:
    """The two commands ``engram demo`` prints to open its log in the web UI: the service
    (its environment and argv) and ``engram ui``'s argv."""
    section = out.split("Open it in the web UI", 1)[1].split("How to check it yourself", 1)[0]
    serve, ui = (shlex.split(line) for line in section.splitlines() if line.startswith("  "))
    env = dict(a.split("=", 1) for a in serve if re.match(r"^[A-Z_]+=", a))
    return env, [a for a in serve if a.split("=", 1)[0] not in env], ui


@contextmanager
def _serve_as_printed(env: dict[str, str], demo_out: str | None) -> Iterator[str]:
    """The service for the test: after the demo, the very command it printed (on a free port
    instead of 8080); else ``engram serve``."""
    if demo_out is None:
        with engram_serve(env) as url:
            yield url
        return
    extra, argv, _ = _demo_ui_commands(demo_out)
    assert argv[1:] == ["serve", "--port", "8080"] and extra["ENGRAM_HOME"] == env["ENGRAM_HOME"], (
        extra,
        argv,
    )
    port = free_port()
    with listening([*argv[:-1], str(port)], {**env, **extra}, port, what="the demo's engram serve"):
        yield f"http://127.0.0.1:{port}"


def test_the_web_ui_in_a_real_browser(tmp_path: Path, cli_db: str | None) -> None:  # noqa: F811
    assert CHROMIUM is not None, "CI installs Debian's chromium (.ci/install-interop.sh)"
    from playwright.sync_api import Route, sync_playwright

    home = tmp_path / "home"
    env = {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_DEV_MODE": "1",
        "COLUMNS": "200",
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # the client's pins, not the user's
    demo_out = None
    if cli_db is None:
        # a fresh embedded log: a session every few of 60 simulated days, so the plots have
        # months, weeks and a growing log
        demo_out = _run(env, "demo")
    else:
        env["ENGRAM_DATABASE_URL"] = cli_db
        _run(env, "init", "--origin", "example.com/engram-ui")
        _run(env, "demo", "--into-this-log")
    vkey = _run(env, "log", "key").strip()
    key = tmp_path / "claude.key"
    _run(env, "agent", "create", "claude", "--key-file", str(key))
    shots = Path(SHOTS) if SHOTS else None

    with _serve_as_printed(env, demo_out) as url, sync_playwright() as pw:
        s = ["--server", url, "--key-file", str(key)]
        for cat, content in (
            ("PREFERENCE", "The user wants short answers"),
            ("CONTEXT", "The user's editor is vim."),
            ("CONTEXT", "The user's editor is VS Code."),
        ):
            _run(env, "memory", "write", *s, "--category", cat, "--content", content)
        _run(
            env,
            "event",
            "append",
            *s,
            "--kind",
            "pact.outcome",
            "--body",
            '{"pact":"p1","result":"fulfilled","quality":92}',
        )
        _run(
            env,
            "event",
            "append",
            *s,
            "--kind",
            "eval.outcome",
            "--body",
            '{"eval":"e1","result":"pass","score":88}',
        )
        claim = tmp_path / "claim.json"
        _run(env, "bundle", "create", "--agent", "claude", "-o", str(claim))

        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            elsewhere: list[str] = []
            errors: list[str] = []
            page.on(
                "request", lambda r: None if r.url.startswith((url, "data:")) else elsewhere.append(r.url)
            )
            page.on("pageerror", lambda e: errors.append(str(e)))

            # 1. the explorer: the checkpoint's signature, checked in the browser
            page.goto(url + "/", wait_until="load")
            page.click("text=Open the explorer")
            page.wait_for_selector("#cp-check.ok", timeout=20_000)
            assert "Verified in your browser" in page.inner_text("#cp-check")
            assert page.locator("svg.plot").count() == 1  # the log's size over time
            _plots_read_whole(page)
            id_font = page.evaluate(
                """() => { const h = document.querySelector("h1"), c = h.querySelector("code");
                  return [getComputedStyle(h).fontSize, getComputedStyle(c).fontSize, getComputedStyle(c).fontFamily]; }"""
            )
            assert id_font[0] == id_font[1] and "mono" not in id_font[2], id_font  # the log's name reads
            if demo_out is not None:  # the demo's log grew over its weeks, not in one step
                cells = page.eval_on_selector_all(
                    "#growth-h ~ details td:first-child", "tds => tds.map(td => td.textContent)"
                )
                days = {c.split(" ")[0] for c in cells}
                assert len(days) >= 8, days
            if shots:
                page.screenshot(path=str(shots / "explorer.png"), full_page=True)
            _accessible(page)
            # a favicon (browsers ask every page of the service for /favicon.ico)
            icon = page.request.get(url + "/favicon.ico")
            assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml", icon.status

            # 2. find an agent, see its plots and figures
            page.fill("#q", "support")
            page.click("button:has-text('Find agent')")
            page.click("a:has-text('support-bot')")
            page.wait_for_selector("h1:has-text('support-bot')")
            assert page.locator("svg.plot").count() == 2  # quality by month, outcomes by week
            assert int(page.inner_text("#fulfilled")) >= 1
            assert page.locator("text=Key history").count() == 1
            _plots_read_whole(page)
            # ratios as percentages with their counts; the demo's sessions are covered
            coverage = page.inner_text("#coverage")
            m = re.fullmatch(r"(\d+(?:\.\d)?)%\s+(\d+) of (\d+) closed sessions", coverage.strip())
            assert m and float(m[1]) > 0 and int(m[2]) >= 14, coverage
            assert re.fullmatch(
                r"\d+(\.\d)?%\s+\d+ of \d+ with evidence", page.inner_text("#attestation").strip()
            )
            heading = page.evaluate(
                """() => { const h = document.querySelector("h1"), c = h.querySelector("code");
                  return [getComputedStyle(h).fontSize, getComputedStyle(c).fontSize, getComputedStyle(c).fontFamily]; }"""
            )
            assert heading[0] == heading[1] and "mono" not in heading[2], heading  # the agent's id reads
            if demo_out is not None:  # sessions over the demo's weeks: many weeks, several months
                weeks = page.locator("#o-h ~ details tbody tr").count()
                months = page.locator("#q-h ~ details tbody tr").count()
                assert weeks >= 6 and months >= 2, (weeks, months)
            if shots:
                page.screenshot(path=str(shots / "agent.png"), full_page=True)
            _accessible(page)
            # at a phone's width the agent's page fits: no horizontal scroll
            phone = browser.new_page(viewport={"width": 390, "height": 844})
            phone.goto(page.url)
            assert phone.evaluate("document.documentElement.clientWidth") == 390
            _fits_the_width(phone)
            if shots:
                phone.screenshot(path=str(shots / "agent-390.png"), full_page=True)
            phone.close()
            # claude has a pact and an evaluation outcome: two bars in its week, side by side
            page.goto(url + "/ui/agents/claude")
            bars = page.eval_on_selector_all(
                "svg.plot rect[data-bar]",
                "rs => rs.map(r => [r.dataset.bar, r.x.baseVal.value, r.x.baseVal.value + r.width.baseVal.value])",
            )
            pact = [b for b in bars if b[0] == "pact"]
            evals = [b for b in bars if b[0] == "eval"]
            assert pact and evals, bars
            assert all(p[2] <= e[1] or e[2] <= p[1] for p in pact for e in evals), bars  # they do not overlap
            page.go_back()

            # 3. an entry: inclusion verified in the browser; a proof altered in flight fails
            page.click("a:has-text('pact.outcome')")
            page.click("table.entries tbody tr:first-child td:first-child a")
            page.wait_for_selector("#inclusion-result.ok", timeout=20_000)
            assert page.inner_text("#inclusion-result").startswith("VERIFIED")
            if shots:
                page.screenshot(path=str(shots / "entry.png"), full_page=True)
            _accessible(page)

            def tamper(route: Route) -> None:
                resp = route.fetch()
                doc = resp.json()
                raw = bytearray(base64.b64decode(doc["proof"][0]))
                raw[3] ^= 0x04
                doc["proof"][0] = base64.b64encode(bytes(raw)).decode()
                route.fulfill(response=resp, body=json.dumps(doc))

            page.route("**/v1/proofs/inclusion*", tamper)
            page.click("#verify-entry")
            page.wait_for_selector("#inclusion-result.bad", timeout=20_000)
            assert "FAILED at inclusion (inclusion.root)" in page.inner_text("#inclusion-result")
            page.unroute("**/v1/proofs/inclusion*")

            # 4. the buyer's verifier: the same checks as engram-verify, in the browser
            page.click("nav >> text=Verify a bundle")
            page.set_input_files("#bundle-file", str(claim))
            page.fill("#log-key", vkey)
            page.click("#verify-button")
            page.wait_for_selector("#verdict.ok, #verdict.bad", timeout=30_000)
            assert page.inner_text("#verdict") == "VERIFIED"
            # the verdict is below the fold at 1280x900: the page brings it into view and focus
            seen = page.evaluate(
                """() => { const r = document.getElementById("verdict").getBoundingClientRect();
                  return [r.top, r.bottom, window.innerHeight, document.activeElement.id]; }"""
            )
            assert seen[0] >= 0 and seen[1] <= seen[2] and seen[3] == "verdict", seen
            cli = _cli_report(claim, vkey)
            shown = page.eval_on_selector_all(
                "#report-steps li", "els => els.map(e => [e.dataset.check, e.classList.contains('ok')])"
            )
            assert shown == [[c["check"], c["ok"]] for c in cli["checks"]]
            if shots:
                page.screenshot(path=str(shots / "verify.png"), full_page=True)
            _accessible(page)

            # ...or from a URL the buyer pastes (here a host the page has never seen, answered by
            # the test with CORS, as a bundle host would)
            def bundle_host(route: Route) -> None:
                route.fulfill(
                    body=claim.read_bytes(),
                    headers={"Access-Control-Allow-Origin": "*", "Content-Type": "application/json"},
                )

            page.route("http://bundles.example/**", bundle_host)
            page.goto(url + "/ui/verify")
            page.fill("#bundle-url", "http://bundles.example/claim.json")
            page.fill("#log-key", vkey)
            page.click("#verify-button")
            page.wait_for_selector("#verdict.ok", timeout=30_000)
            assert page.inner_text("#report-title") == "bundle http://bundles.example/claim.json"
            assert "http://bundles.example/claim.json" in elsewhere  # the one host the buyer named

            honest = json.loads(claim.read_text())
            for name, change in _tampered(honest).items():
                bad = json.loads(claim.read_text())
                change(bad)
                path = tmp_path / f"bad-{name}.json"
                path.write_text(json.dumps(bad))
                cli = _cli_report(path, vkey)
                assert cli["verified"] is False, name
                got = page.evaluate(
                    "([b, k]) => window.engramUi.verifyBundleReport(new TextEncoder().encode(b), k)",
                    [path.read_text(), vkey],
                )
                assert got["verified"] is False and _shape(got["checks"]) == _shape(cli["checks"]), (
                    name,
                    got,
                    cli,
                )
            # the demo's bundle carries a share token for buyer-1: verified in the page as the
            # CLI does with --audience (and refused for another audience, with the same check)
            shared = home / "bundle-support-bot.json"
            for audience in ("buyer-1", "buyer-2"):
                cli = _cli_report(shared, vkey, "--audience", audience)
                got = page.evaluate(
                    "([b, k, a]) => window.engramUi.verifyBundleReport(new TextEncoder().encode(b), k, {audience: a})",
                    [shared.read_text(), vkey, audience],
                )
                assert got["verified"] is (audience == "buyer-1") is cli["verified"], (audience, got, cli)
                assert _shape(got["checks"]) == _shape(cli["checks"]), (audience, got, cli)
                assert any(c["check"] == "token" for c in got["checks"]), got
            # a witness policy the checkpoint does not meet (no witness cosigned it)
            witness_key = _format_vkey(
                "witness.example/w1", Ed25519PrivateKey.generate().public_key().public_bytes_raw()
            )
            policy = tmp_path / "policy.txt"
            policy.write_text(f"witness w1 {witness_key}\nquorum w1\n")
            cli = _cli_report(claim, vkey, "--witness-policy", str(policy))
            page.fill("#witness-policy", policy.read_text())
            page.click("#verify-button")
            page.wait_for_selector("#verdict.bad", timeout=30_000)
            shown = page.eval_on_selector_all(
                "#report-steps li", "els => els.map(e => [e.dataset.check, e.dataset.failedCheck || null])"
            )
            assert shown == [[c["check"], c.get("failed_check")] for c in cli["checks"]], (shown, cli)
            page.fill("#witness-policy", "")

            # another key for the same log name, through the page itself
            other = format_verifier_key(
                vkey.split("+")[0], Ed25519PrivateKey.generate().public_key().public_bytes_raw()
            )
            page.fill("#log-key", other)
            page.click("#verify-button")
            page.wait_for_selector("#verdict.bad", timeout=30_000)
            cli = _cli_report(claim, other)
            shown = page.eval_on_selector_all(
                "#report-steps li", "els => els.map(e => [e.dataset.check, e.classList.contains('ok')])"
            )
            assert shown == [[c["check"], c["ok"]] for c in cli["checks"]]
            assert page.inner_text("#verdict") == (
                f"FAILED at check {cli['checks'][-1]['n']} ({cli['checks'][-1]['check']}: "
                f"{cli['checks'][-1]['failed_check']})"
            )

            # 5. the owner's view: refused without the agent's authority, then opened with it
            page.goto(url + "/ui/agents/claude/memory")
            assert "needs the agent's authority" in page.inner_text("main")
            assert "VS Code" not in page.content()
            link = _run(env, "ui", *s).strip().splitlines()[-1]
            assert "/ui/login?ticket=" in link and env.get("ENGRAM_OPERATOR_TOKEN", "\0") not in link
            page.goto(link)
            page.wait_for_selector('h1:has-text("claude\'s memory")')
            # the view opens on HOT (the context every session starts with), the preference in it
            assert page.inner_text(".tabs [aria-current=page]").startswith("HOT")
            assert "The user wants short answers" in page.inner_text("main")
            page.click(".tabs a:has-text('WARM')")
            assert "The user's editor is VS Code." in page.inner_text("main")
            page.fill("#recall-q", "What is the user's editor now?")
            page.click("button:has-text('Recall')")
            block = page.inner_text("#recall-block")
            assert block.startswith("<memory-context") and "VS Code" in block and "earlier: vim" in block
            _fits_the_width(page)
            if shots:
                page.screenshot(path=str(shots / "memory.png"), full_page=True)
            _accessible(page)
            page.click("a:has-text('Past values')")
            assert "The user's editor is vim." in page.inner_text("main")
            # an empty tab says how memories get in, with the command to try
            page.click(".tabs a:has-text('Archived')")
            empty = page.inner_text("#empty-state")
            assert "No archived memories yet" in empty and "engram memory write --key-file" in empty, empty
            # a wrong query value on a UI route: an HTML page saying what is wrong (the API's
            # routes keep their problem JSON)
            for bad, names in (
                ("/ui/agents/claude/memory?tier=WARMEST", "tier"),
                ("/ui/entries?limit=999", "limit"),
            ):
                answer = page.goto(url + bad)
                assert answer is not None and answer.status == 400, bad
                assert answer.headers["content-type"].startswith("text/html"), answer.headers
                assert names in page.inner_text(".error") and page.locator("h1").count() == 1, bad
                _accessible(page)
            answer = page.goto(url + "/ui/no-such-page")
            assert answer is not None and answer.status == 404 and "No such page" in page.inner_text("h1")
            api = page.request.get(url + "/v1/proofs/inclusion?index=-1")
            assert api.status == 400 and api.headers["content-type"] == "application/problem+json"
            page.goto(url + "/ui/agents/support-bot/memory")
            assert "Not your agent" in page.inner_text("main")
            page.goto(link)  # the link works once
            assert "already used" in page.inner_text("main")

            if demo_out is not None:
                # the demo's own `engram ui` command, as printed, opens its main agent's memory
                ui_cmd = [a.replace("http://127.0.0.1:8080", url) for a in _demo_ui_commands(demo_out)[2]]
                printed = subprocess.run(ui_cmd, env=env, capture_output=True, text=True, timeout=120)
                assert printed.returncode == 0, printed.stderr
                page.goto(printed.stdout.strip().splitlines()[-1])
                page.wait_for_selector('h1:has-text("support-bot\'s memory")')
                assert page.inner_text(".tabs [aria-current=page]").startswith("HOT")

            assert not [u for u in elsewhere if not u.startswith("http://bundles.example/")], elsewhere
            assert not errors, errors
        finally:
            browser.close()
