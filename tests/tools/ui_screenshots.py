"""Write the screenshots of docs/ui.md: a log with six months of an agent's work (the clock
is simulated, so the plots have months and weeks), served by the app on loopback and shot in
Debian's chromium through Playwright.

    .venv/bin/python tests/tools/ui_screenshots.py docs/ui

The browser test (tests/e2e/test_ui_browser.py) checks the same pages against a
live ``engram serve`` on both backends; this script only makes pictures.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from api.app import create_app  # noqa: E402
from api.settings import ApiSettings  # noqa: E402
from engram.client.agent_memory import AgentMemory  # noqa: E402
from engram.client.sdk import Agent  # noqa: E402
from engram.protocol.keyfiles import LogKey  # noqa: E402
from engram.protocol.uiticket import make_ticket  # noqa: E402
from ledger.bundle import create_bundle, pact_claim  # noqa: E402
from ledger.compose import create_ledger  # noqa: E402
from ledger.memory.service import MemoryService  # noqa: E402
from ledger.memory.transport import InProcessMemory  # noqa: E402
from ledger.storage.db import make_engine  # noqa: E402

DAY_US = 86_400_000_000


class SimClock:
    """Server time that the script moves: six months ago, forward."""

    def __init__(self) -> None:
        self.now = (int(time.time()) - 182 * 86_400) * 1_000_000

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def main(out: Path) -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ui-shots-"))
    clock = SimClock()
    ledger = create_ledger(
        make_engine(f"sqlite:///{tmp}/log.db"),
        LogKey("example.com/engram", Ed25519PrivateKey.generate()),
        clock=clock,
        policy_key=Ed25519PrivateKey.generate(),
    )
    memory = MemoryService(ledger, access_log="off")
    transport = InProcessMemory(memory)
    rng = random.Random(7)

    def agent(name: str) -> AgentMemory:
        a = Agent.generate(name, log_vkey=ledger.vkey, transport=transport, clock=clock)
        a.register()
        return AgentMemory(a)

    bot, helper = agent("support-bot"), agent("research-bot")
    bot.write(category="PREFERENCE", content="Customers want replies within one business day.")
    for day in range(0, 182, 2):
        clock.now += 2 * DAY_US
        skill = min(95, 70 + day // 8)
        for _ in range(rng.randint(1, 4)):
            q = max(0, min(100, int(rng.gauss(skill, 8))))
            bot.record(
                "pact.outcome",
                {
                    "pact": f"ticket-{rng.randrange(10**6)}",
                    "result": "fulfilled" if q >= 60 else "violated",
                    "quality": q,
                    "evidence": "ticket closed by the customer",
                },
            )
        if day % 10 == 0:
            s = rng.randint(60, 99)
            bot.record(
                "eval.outcome", {"eval": f"weekly-{day}", "result": "pass" if s >= 70 else "fail", "score": s}
            )
        if day % 30 == 0:
            helper.write(
                category="LEARNING", content=f"Release notes for month {day // 30 + 1} are in the wiki."
            )
    bot.write(category="CONTEXT", content="The escalation contact is Dana.")
    clock.now += DAY_US
    bot.write(category="CONTEXT", content="The escalation contact is Priya.")
    bot.write(category="LEARNING", content="Refunds over 500 EUR need a manager's approval.")
    bundle = create_bundle(ledger, pact_claim(ledger, "support-bot"))
    (tmp / "claim.json").write_bytes(bundle)

    app = create_app(
        ApiSettings(operator_token="screenshots-operator-token-0123456789"),
        ledger=ledger,
        memory_service=memory,
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    chromium = shutil.which("chromium")
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(url + "/ui")
            page.wait_for_selector("#cp-check.ok")
            page.screenshot(path=str(out / "explorer.png"), full_page=True)
            page.goto(url + "/ui/agents/support-bot")
            page.screenshot(path=str(out / "agent.png"), full_page=True)
            page.goto(url + "/ui/entries?agent=support-bot&kind=pact.outcome")
            page.click("table.entries tbody tr:first-child td:first-child a")
            page.wait_for_selector("#inclusion-result.ok")
            page.screenshot(path=str(out / "entry.png"), full_page=True)
            page.goto(url + "/ui/verify")
            page.set_input_files("#bundle-file", str(tmp / "claim.json"))
            page.click("#verify-button")
            page.wait_for_selector("#verdict.ok")
            page.screenshot(path=str(out / "verify.png"), full_page=True)
            ticket = make_ticket(
                ledger.origin, "support-bot", bot.agent.signer.private_key, now_s=int(time.time())
            )
            page.goto(f"{url}/ui/login?ticket={ticket}")
            page.fill("#recall-q", "Who is the escalation contact now?")
            page.click("button:has-text('Recall')")
            page.wait_for_selector("#recall-block")
            page.screenshot(path=str(out / "memory.png"), full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {', '.join(sorted(p.name for p in out.glob('*.png')))} to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/ui"))
