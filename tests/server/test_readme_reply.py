"""README's quick start shows the webhook's reply to ``examples/admission-review.json`` as it comes (it
showed a spaced-out JSON while the server answers compact)."""

from __future__ import annotations

import re
from pathlib import Path

from webhook.core.config import Config
from webhook.serving.app import create_app

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_shows_the_reply_the_webhook_sends() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"curl --cacert certs/localhost/ca.crt https://localhost:8443/validate \\\n.*?\n# (.*?)\n```",
                      readme, re.S)
    assert block, "the quick start's curl example"
    reply = create_app(Config()).test_client().post(
        "/validate", data=(ROOT / "examples" / "admission-review.json").read_bytes(),
        headers={"Content-Type": "application/json"})
    assert reply.status_code == 200
    assert block.group(1) == reply.get_data(as_text=True)
