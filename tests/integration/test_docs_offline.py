"""``/docs`` works offline (issue 13): the Swagger UI page loads its script and style from
the service itself, never from a CDN, and both are served."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from ledger.log import Ledger


def test_docs_page_and_its_assets_come_from_the_service(ledger: Ledger) -> None:
    client = TestClient(create_app(ApiSettings(dev_mode=True), ledger=ledger))
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.text)
    assert urls and not [u for u in urls if u.startswith(("http://", "https://", "//"))], urls
    for url in ("/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css"):
        assert url in page.text
        asset = client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 10_000
    assert client.get("/openapi.json").json()["info"]["title"] == "Engram"
