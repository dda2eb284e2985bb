#!/usr/bin/env python3
"""Drives the entitlement console in headless Chromium through chromedriver's WebDriver API (standard library only).

    console-browser.py --url http://127.0.0.1:PORT/console --token TOKEN --query ID [--query ID…] [--screenshot out.png]
                       [--screenshot-dir DIR]

Starts chromedriver on a free port, signs in with a wrong token first (the page must refuse it), then with TOKEN,
looks up each ID in turn, waits for each answer and prints one JSON object with what the page showed for each
(texts of the summary, the tables and the timeline). The screenshot is taken after the last lookup; with
--screenshot-dir, one after each lookup too (DIR/1.png, DIR/2.png, …). Exit status 0
when the page answered; 2 with a message when a step failed.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    def __init__(self, base):
        self.base = base
        self.session = None

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"{}").get("value")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:400]
            raise RuntimeError(f"webdriver {method} {path}: HTTP {error.code}: {detail}")

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def find(self, css):
        return self.s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def script(self, source, *args):
        return self.s("POST", "/execute/sync", {"script": source, "args": list(args)})

    def wait(self, source, limit=30, what="the page"):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            value = self.script(source)
            if value:
                return value
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--query", required=True, action="append")
    parser.add_argument("--screenshot")
    parser.add_argument("--screenshot-dir")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    arguments = parser.parse_args()
    for binary in (arguments.chromium, arguments.chromedriver):
        if not os.path.exists(binary):
            print(f"missing {binary}: apt-get install chromium chromium-driver", file=sys.stderr)
            return 2

    port = free_port()
    driver_process = subprocess.Popen([arguments.chromedriver, f"--port={port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = Driver(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if driver.call("GET", "/status", timeout=2).get("ready"):
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not become ready")
            time.sleep(0.1)
        capabilities = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": arguments.chromium, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1360,1640", "--force-device-scale-factor=1", "--hide-scrollbars",
                "--no-first-run", "--disable-extensions", "--lang=en-US"]},
        }}}
        created = driver.call("POST", "/session", capabilities, timeout=90)
        driver.session = created["sessionId"]
        result = {}

        driver.s("POST", "/url", {"url": arguments.url})
        driver.wait("return !document.getElementById('login').hidden", what="the login form")
        result["external_resources"] = driver.script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".filter(n => !n.startsWith(location.origin))")

        token_field = driver.find("#token")
        driver.s("POST", f"/element/{token_field}/value", {"text": "not-the-right-token-00000000"})
        driver.s("POST", f"/element/{driver.find('#login-form button')}/click", {})
        result["wrong_token_message"] = driver.wait(
            "const e = document.getElementById('login-error'); return e.hidden ? '' : e.textContent",
            what="the refusal of a wrong token")

        driver.s("POST", f"/element/{token_field}/value", {"text": arguments.token})
        driver.s("POST", f"/element/{driver.find('#login-form button')}/click", {})
        result["caller"] = driver.wait(
            "return document.getElementById('app').hidden ? '' : document.getElementById('caller').textContent",
            what="the signed-in view")

        result["lookups"] = []
        for number, wanted in enumerate(arguments.query, start=1):
            query = driver.find("#query")
            driver.s("POST", f"/element/{query}/clear", {})
            driver.s("POST", f"/element/{query}/value", {"text": wanted})
            # The submit handler hides the previous answer before its first request: wait for the new one.
            driver.s("POST", f"/element/{driver.find('#search button')}/click", {})
            driver.wait("return !document.getElementById('result').hidden || "
                        "document.getElementById('status').classList.contains('error')", what="the lookup's answer")
            result["lookups"].append(driver.script("""
                const text = (id) => document.getElementById(id).textContent.trim();
                const rows = (id) => Array.from(document.querySelectorAll('#' + id + ' tbody tr'))
                    .map(tr => Array.from(tr.children).map(td => td.textContent.trim()));
                const shown = !document.getElementById('result').hidden;
                return {
                    query: arguments[0], found: shown, status: text('status'),
                    account: shown ? text('account-id') : '', summary: shown ? text('summary') : '',
                    as_of: text('as-of'), note: text('match-note'),
                    pills: Array.from(document.querySelectorAll('#pills .pill')).map(p => p.textContent.trim()),
                    entitlements: rows('entitlements'), transactions: rows('transactions'),
                    consumables: rows('consumables'),
                    timeline: Array.from(document.querySelectorAll('#timeline > li'))
                        .map(li => li.textContent.replace(/\\s+/g, ' ').trim()),
                };
            """, wanted))
            if arguments.screenshot_dir:
                with open(os.path.join(arguments.screenshot_dir, f"{number}.png"), "wb") as handle:
                    handle.write(base64.b64decode(driver.s("GET", "/screenshot")))
        if arguments.screenshot:
            png = base64.b64decode(driver.s("GET", "/screenshot"))
            with open(arguments.screenshot, "wb") as handle:
                handle.write(png)
            result["screenshot_bytes"] = len(png)
        print(json.dumps(result))
        return 0
    except Exception as error:
        print(f"console-browser: {error}", file=sys.stderr)
        return 2
    finally:
        if driver.session:
            try:
                driver.call("DELETE", f"/session/{driver.session}", timeout=30)
            except Exception:
                pass
        driver_process.terminate()
        try:
            driver_process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            driver_process.kill()


if __name__ == "__main__":
    sys.exit(main())
