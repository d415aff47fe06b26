"""Issue 26, finding 4: ``/docs`` showed "Unable to render this definition" (the bundled
Swagger UI 4.15 cannot read the OpenAPI 3.1 document FastAPI produces) and ``GET /`` was a
404. Headless Chromium (Debian's package, driven by Playwright; nothing is downloaded) loads
``/``, follows its link to ``/docs`` and finds the operations rendered, offline: every
request the page makes goes to the service itself."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM, engram_serve

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true", reason="no chromium here")
def test_docs_render_in_a_real_browser(tmp_path: Path) -> None:
    assert CHROMIUM is not None, "CI installs Debian's chromium (.ci/install-interop.sh)"
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_EMBEDDER": "off"}
    env |= {"ENGRAM_DEV_MODE": "1"}
    env.pop("ENGRAM_DATABASE_URL", None)
    assert subprocess.run([ENGRAM, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    with engram_serve(env) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            elsewhere: list[str] = []
            page.on("request", lambda r: None if r.url.startswith(url) else elsewhere.append(r.url))
            page.goto(url + "/", wait_until="load")
            assert "Engram" in page.title()
            page.click("text=API documentation")
            page.wait_for_selector(".opblock-summary-path", timeout=30_000)
            text = page.inner_text("body")
            assert "Unable to render this definition" not in text
            paths = page.locator(".opblock-summary-path").all_inner_texts()
            assert any("/v1/agents/{agent}/memories" in p for p in paths), paths[:10]
            assert "/checkpoint" in [p.strip() for p in paths]
            page.screenshot(path=str(tmp_path / "docs.png"))
            assert not elsewhere, elsewhere  # offline: no CDN, no other host
        finally:
            browser.close()
