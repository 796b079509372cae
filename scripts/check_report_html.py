#!/usr/bin/env python
"""Open a Snakemake HTML report in headless Chromium and check that its results render.

For every result embedded in the report: images must decode (naturalWidth > 0) when shown in the
report's own viewer, HTML results (our tables) must hold a table with at least one row, and expected
names given with --expect must be present. Console errors and uncaught exceptions fail the check.
Screenshots of the start page, the first figure and the first table go to --screenshots.

Talks to Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe): no extra packages.
Without a Chromium binary it prints SKIP and exits 0 (or 1 with --require-browser).

  python scripts/check_report_html.py results/<run>/report.html --screenshots results/<run>/report_check \
      --expect table4_bfcl.html speedup.html accuracy_vs_time.png
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome-headless-shell")


def find_browser() -> str | None:
    env = os.environ.get("CHROMIUM")
    if env:
        return env
    return next((p for b in BROWSERS if (p := shutil.which(b))), None)


def _move_above(fd: int, low: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, low)
    os.close(fd)
    return moved


class DevTools:
    """Minimal DevTools client over --remote-debugging-pipe (NUL-separated JSON on fds 3 and 4)."""

    def __init__(self, browser: str, profile: str):
        to_child_r, self._to_child_w = os.pipe()
        self._from_child_r, from_child_w = os.pipe()
        # Move the child's ends above 4 first, so wiring them to 3 and 4 cannot clobber one another.
        to_child_r, from_child_w = (_move_above(fd, 10) for fd in (to_child_r, from_child_w))

        def wire_fds() -> None:  # runs in the child: Chromium reads fd 3 and writes fd 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        args = [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "--window-size=1400,1000",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            args, pass_fds=(3, 4), preexec_fn=wire_fds, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._from_child_r, 1 << 16)
            if not chunk:
                raise RuntimeError(
                    "Chromium closed the DevTools pipe: " + self.proc.stderr.read().decode()[-2000:]
                )
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def call(
        self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30
    ) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Page:
    def __init__(self, tools: DevTools):
        self.tools = tools
        target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def call(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        return self.tools.call(method, params, self.session, timeout)

    def eval(self, expression: str, timeout: float = 30):
        r = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout,
        )
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails'].get('text')}: {expression[:120]}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval(expression):
                return True
            time.sleep(0.2)
        return False

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def errors(self) -> list[str]:
        out = []
        for ev in self.tools.events:
            if ev.get("sessionId") != self.session:
                continue
            p = ev.get("params", {})
            if ev.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(
                    "console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
                )
            elif ev.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out


SHOW = "app.setView({content: %s, contentPath: results[%s].data_uri, resultPath: %s})"


def check(report: Path, screenshots: Path, expect: list[str], browser: str) -> list[str]:
    problems: list[str] = []
    screenshots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        tools = DevTools(browser, profile)
        try:
            page = Page(tools)
            page.call("Page.navigate", {"url": report.resolve().as_uri()})
            if not page.wait_for(
                "typeof app !== 'undefined' && typeof results !== 'undefined'"
                " && document.querySelector('#app') && document.querySelector('#app').childElementCount > 0"
            ):
                return ["the report's app did not render within 20 s", *page.errors()]
            page.screenshot(screenshots / "start.png")
            entries = page.eval("Object.entries(results).map(([k, v]) => [k, v.mime_type])")
            names = {Path(k).name for k, _ in entries}
            problems += [f"expected result {n} is not in the report" for n in expect if n not in names]
            shot = {"image/png": "figure.png", "text/html": "table.png"}
            for path, mime in entries:
                key = json.dumps(path)
                if mime in ("image/png", "image/jpeg", "image/svg+xml"):
                    page.eval(SHOW % ('"img"', key, key))
                    shown = f"[...document.images].find(i => i.src === results[{key}].data_uri)"
                    # complete turns true once the image has loaded or failed; a failed one has no width.
                    loaded = page.wait_for(
                        f"(() => {{ const i = {shown}; return !!i && i.complete; }})()", 10
                    )
                    if not (loaded and page.eval(f"{shown}.naturalWidth > 0")):
                        problems.append(f"{path}: image does not render")
                elif mime == "text/html":
                    rows = page.eval(
                        f"(() => {{ const u = results[{key}].data_uri;"
                        " const html = new TextDecoder().decode(Uint8Array.from("
                        "atob(u.slice(u.indexOf('base64,') + 7)), c => c.charCodeAt(0)));"
                        " return new DOMParser().parseFromString(html, 'text/html')"
                        ".querySelectorAll('table tr').length; })()"
                    )
                    if not rows or rows < 2:
                        problems.append(f"{path}: HTML result holds no table rows")
                    page.eval(SHOW % ('"html"', key, key))
                    page.wait_for("!!document.querySelector('iframe')", 10)
                    time.sleep(0.5)
                else:
                    continue
                if mime in shot and not (screenshots / shot[mime]).exists():
                    page.screenshot(screenshots / shot.pop(mime))
            problems += page.errors()
        finally:
            tools.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", type=Path)
    p.add_argument("--screenshots", type=Path, default=None, help="folder for PNG screenshots")
    p.add_argument("--expect", nargs="*", default=[], help="result file names that must be in the report")
    p.add_argument("--require-browser", action="store_true", help="fail instead of skipping without Chromium")
    a = p.parse_args(argv)
    if not a.report.is_file():
        print(f"FAIL: no report at {a.report}", file=sys.stderr)
        return 1
    browser = find_browser()
    if browser is None:
        print("SKIP: no Chromium on PATH (Debian: apt-get install -y chromium; or set CHROMIUM=/path)")
        return 1 if a.require_browser else 0
    shots = a.screenshots or a.report.with_name(a.report.stem + "_check")
    problems = check(a.report, shots, a.expect, browser)
    for line in problems:
        print(f"FAIL: {line}")
    if problems:
        return 1
    print(f"OK: {a.report} renders in {Path(browser).name} with no console errors; screenshots in {shots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
