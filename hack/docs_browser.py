"""Opens every page of the built documentation site (site/, `make docs`) in headless Chromium and fails on what a
reader would see broken: a page or asset the server answers with an error, a request that fails, a console error
or an uncaught exception, or a page whose content did not render.

One browser for all pages, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages
ended by a NUL byte on file descriptors 3 and 4), so no driver or package beyond Debian's chromium
(hack/browser-deps.sh) is needed. The site is served from loopback only; a request anywhere else is an error too
(the site must render offline).

    python hack/docs_browser.py [SITE_DIR]    # exit 1 naming each problem, else one line per page checked
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTLE = 0.5  # seconds without a new request after the load event: the page's scripts have run
PAGE_TIMEOUT = 30.0


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class Browser:
    """Chromium over the DevTools pipe: ``call`` sends a command and returns its result; events are queued."""

    def __init__(self, chromium: str) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="qos-guard-docs-browser-")
        def as_3_and_4() -> None:  # in the child: chromium reads commands on fd 3 and writes on fd 4
            read, write = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
            pass_fds=(3, 4, to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=as_3_and_4)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            got = self._read()
            if got.get("id") == self._next:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                result: dict[str, Any] = got.get("result", {})
                return result
            self.events.append(got)

    def pump(self, seconds: float) -> None:
        """Read the events that come within ``seconds`` (a command round trip marks the end)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.call("Browser.getVersion")
            time.sleep(0.05)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self._profile, ignore_errors=True)


def check_page(browser: Browser, session: str, url: str) -> tuple[list[str], int]:
    """Problems of one page, and how many requests it made."""
    browser.events.clear()
    browser.call("Page.navigate", session, url=url)
    deadline, last_count, quiet_since = time.monotonic() + PAGE_TIMEOUT, -1, time.monotonic()
    loaded = False
    while time.monotonic() < deadline:
        browser.pump(0.1)
        loaded = loaded or any(e.get("method") == "Page.loadEventFired" for e in browser.events)
        requests = sum(e.get("method") == "Network.requestWillBeSent" for e in browser.events)
        if requests != last_count:
            last_count, quiet_since = requests, time.monotonic()
        if loaded and time.monotonic() - quiet_since >= SETTLE:
            break
    problems = [] if loaded else [f"no load event within {PAGE_TIMEOUT:g} s"]
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent" and not params["request"]["url"].startswith(
                (url.split("/", 3)[0] + "//" + url.split("/", 3)[2], "data:", "blob:")):
            problems.append(f"a request off the site: {params['request']['url']}")
        elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
            problems.append(f"{params['response']['status']} for {params['response']['url']}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(f"failed to load: {params.get('errorText')}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            problems.append(f"uncaught: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append("console error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                          for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            problems.append(f"console error: {params['entry'].get('text')}")
    rendered = browser.call("Runtime.evaluate", session, returnByValue=True, expression=(
        "(() => { const c = document.querySelector('article.md-content__inner');"
        " const h = c && c.querySelector('h1');"
        " return Boolean(c && h && h.textContent.trim() && c.innerText.trim().length > 40"
        " && getComputedStyle(document.querySelector('.md-header')).position !== 'static'); })()"))
    if not rendered.get("result", {}).get("value"):
        problems.append("the page's content or the theme's styles did not render")
    return problems, last_count


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else ROOT / "site"
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.name != "404.html")
    if not pages:
        print(f"{site}: no built pages (make docs first)", file=sys.stderr)
        return 2
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found: bash hack/browser-deps.sh (as root) installs Debian's", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    browser = Browser(chromium)
    failed = 0
    started = time.monotonic()
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session)
        for page in pages:
            problems, requests = check_page(browser, session, base + page)
            failed += bool(problems)
            print(f"{page}: {'; '.join(problems) if problems else f'rendered ({requests} requests)'}")
    finally:
        browser.close()
        server.shutdown()
    print(f"{len(pages)} pages, {failed} with a problem, {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
