"""The dashboard in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
selenium; nothing downloaded at run time) while worker processes work on real Redis and MariaDB:
a task page turns to success by itself (live polling), its report shows a finding's quote, a
dead letter retried from the UI is processed, and a provider batch leads to its tasks. The
worker's own port serves the dashboard too.

With ``DOCLLM_SCREENSHOTS=DIR`` it also saves the main pages as PNGs (``python -m
tests.e2e.dashboard_screenshots`` writes docs/screenshots/)."""

from __future__ import annotations

import base64
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.conftest import in_ci
from tests.e2e.harness import Harness, Probe, docllm_argv, wait_until
from tests.servers.ports import free_port, port_is_open

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
QUOTE = "TODO: write the install steps."
SHOTS = os.environ.get("DOCLLM_SCREENSHOTS")


def document(i: int) -> str:
    return f"# Guide {i}\n\n{QUOTE}\n\n## Usage\n\nRun the tool with `--help` to see its options.\n"


@pytest.fixture
def browser() -> Iterator:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        message = "chromium and chromium-driver are not installed (scripts/test installs them)"
        pytest.fail(message) if in_ci() else pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP reports land in the console
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    yield driver
    driver.quit()


def shot(driver, name: str) -> None:
    """The whole page (beyond the window), through the DevTools protocol."""
    if not SHOTS:
        return
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 1600), "scale": 1}
    png = driver.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip})["data"]
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    (Path(SHOTS) / f"{name}.png").write_bytes(base64.b64decode(png))


@contextmanager
def framing_page(target: str) -> Iterator[str]:
    """An attacker's page on another port that puts ``target`` in an iframe."""
    html = f'<!doctype html><title>look</title><iframe src="{target}" width="800" height="600"></iframe>'.encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_dashboard_in_a_browser_while_workers_process(harness: Harness, probe: Probe, browser, tmp_path: Path):
    from selenium.webdriver.common.by import By

    started = time.monotonic()
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(1, 8):
        (docs / f"guide-{i}.md").write_text(document(i))
    (docs / "broken.md").write_text(document(0))
    tasks = {t["task_name"]: t["task_id"] for t in harness.submit(sorted(docs.glob("*.md")))}
    broken, first = tasks["broken.md"], tasks["guide-1.md"]
    probe.execute("UPDATE task_doc_llm SET document = '' WHERE task_id = :id", id=broken)  # fails for good

    port = free_port()
    harness.spawn("dashboard", [*docllm_argv(), "dashboard", "--port", str(port)], "dashboard")
    wait_until(lambda: port_is_open("127.0.0.1", port), 30, "the dashboard to listen", on_timeout=harness.dump)
    base = f"http://127.0.0.1:{port}"

    browser.get(f"{base}/tasks/{first}")
    status = browser.find_element(By.ID, "task-status")
    assert status.text == "pending"  # before any worker runs

    worker_port = free_port()
    slow = {"DOCLLM_OFFLINE_LATENCY_SECONDS": "0.5"}
    harness.worker(
        "w1",
        env={
            **slow,
            "DOCLLM_METRICS_PORT": str(worker_port),
            "DOCLLM_METRICS_HOST": "127.0.0.1",
            "DOCLLM_DASHBOARD_ON_WORKER": "1",
        },
    )
    harness.worker("w2", env=slow)

    # The page refreshes itself (polling): no reload, the status turns to success and the report appears.
    wait_until(
        lambda: browser.find_element(By.ID, "task-status").text == "success",
        60,
        f"task {first} to show success",
        on_timeout=harness.dump,
    )
    # Read through wait_until: the page's 2 s refresh may swap an element between finding and
    # reading it (StaleElementReferenceException), and the next try reads the new one.
    wait_until(
        lambda: QUOTE in [q.text for q in browser.find_elements(By.CSS_SELECTOR, "blockquote.quote")],
        10,
        "the report's quote",
    )
    wait_until(
        lambda: "medium" in browser.find_element(By.CSS_SELECTOR, ".severity h3").text.lower(), 10, "the severity"
    )
    shot(browser, "task-report")

    wait_until(
        lambda: probe.counts()["failed"] == 1 and probe.counts()["success"] == 7,
        60,
        "every task to end",
        on_timeout=harness.dump,
    )
    browser.get(f"{base}/")
    wait_until(lambda: browser.find_element(By.ID, "queue-dead").text == "1", 10, "one dead letter on the overview")
    chart = (By.CSS_SELECTOR, "svg.chart")
    wait_until(
        lambda: "7 succeeded, 1 failed" in browser.find_element(*chart).get_attribute("aria-label"), 10, "the chart"
    )
    shot(browser, "overview")
    browser.get(f"{base}/tasks?status=success")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tasks tbody tr[data-task-id]")) == 7
    browser.get(f"{base}/tasks")
    shot(browser, "tasks")

    # The operator fixes the document, then retries the dead letter from the UI.
    browser.get(f"{base}/dead")
    row = browser.find_element(By.CSS_SELECTOR, f'#dead tr[data-task-id="{broken}"]')
    assert "empty" in row.text
    shot(browser, "dead-letters")
    probe.execute("UPDATE task_doc_llm SET document = :doc WHERE task_id = :id", doc=document(0), id=broken)
    row.find_element(By.CSS_SELECTOR, "button.retry").click()
    # The click posts a form and the answer is a new page: read its message once it has loaded.
    wait_until(
        lambda: f"requeued task {broken}" in browser.find_element(By.CSS_SELECTOR, ".flash").text,
        10,
        "the retry's message",
    )
    browser.get(f"{base}/tasks/{broken}")
    wait_until(
        lambda: browser.find_element(By.ID, "task-status").text == "success",
        60,
        f"retried task {broken} to succeed",
        on_timeout=harness.dump,
    )
    assert probe.dead_letters() == []

    # The worker's HTTP port serves the same dashboard beside /metrics.
    with urllib.request.urlopen(f"http://127.0.0.1:{worker_port}/tasks?status=success") as page:
        assert page.read().decode().count("data-task-id=") == 8
    browser.get(f"{base}/workers")
    shot(browser, "workers")
    browser.get(f"{base}/llm")
    shot(browser, "llm")

    # Issue 28: the Batches page lists a batch (recorded here through the BatchStore, as a batcher
    # records one), its page links to its member tasks. Hrefs are read through wait_until: the
    # page's refresh may swap an element between finding and reading it.
    from docllm.adapters.sql.batches import SqlAlchemyBatchStore

    ref = "e2e0" * 8
    SqlAlchemyBatchStore(probe.engine).open(ref, "offline", [(first, 1)], int(time.time() * 1000))
    browser.get(f"{base}/batches")
    batch_link = f'#batches tr[data-ref="{ref}"] a'
    browser.get(wait_until(lambda: browser.find_element(By.CSS_SELECTOR, batch_link).get_attribute("href"), 10, ref))
    shot(browser, "batch")
    member = f'#members tr[data-task-id="{first}"] a'
    browser.get(wait_until(lambda: browser.find_element(By.CSS_SELECTOR, member).get_attribute("href"), 10, "a task"))
    wait_until(lambda: ref in browser.find_element(By.CSS_SELECTOR, "tr.batch").text, 10, "the task's batch")

    # Issue 50: nothing the pages need is blocked by their Content-Security-Policy, and a page of
    # another origin (here another port) that frames the dashboard gets nothing.
    assert not [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    with framing_page(f"{base}/dead") as attacker:
        browser.get(attacker)
        wait_until(
            lambda: any("frame-ancestors" in e["message"] for e in browser.get_log("browser")),
            10,
            "the browser to refuse the frame",
        )
    print(f"dashboard browser test: {time.monotonic() - started:.1f} s", file=sys.stderr)


def test_a_token_login_in_a_browser_ends_at_logout(harness: Harness, browser, tmp_path: Path):
    """Issue 50 in a real browser, against `docllm dashboard` with a token, HTTPS only behind a
    proxy, reached as through `kubectl port-forward` (plain HTTP from 127.0.0.1): the login form
    goes to the page asked for, a crafted `next` stays on the site, and a cookie kept from before
    the logout opens nothing."""
    import secrets

    from selenium.webdriver.common.by import By

    token = secrets.token_hex(32)
    port = free_port()
    env = {"DOCLLM_DASHBOARD_TOKEN": token, "DOCLLM_DASHBOARD_HTTPS": "1", "DOCLLM_DASHBOARD_TRUSTED_PROXIES": "1"}
    argv = [*docllm_argv(), "dashboard", "--host", "0.0.0.0", "--port", str(port)]
    harness.spawn("dashboard", argv, "dashboard", env=env)
    wait_until(lambda: port_is_open("127.0.0.1", port), 30, "the dashboard to listen", on_timeout=harness.dump)
    base = f"http://127.0.0.1:{port}"

    def log_in(url: str) -> None:
        browser.get(url)
        browser.find_element(By.NAME, "token").send_keys(token)
        browser.find_element(By.CSS_SELECTOR, "form button").click()

    log_in(f"{base}/dead")  # sent to the login, then back to the page asked for
    wait_until(lambda: browser.current_url == f"{base}/dead", 10, "the page asked for")
    kept = browser.get_cookie("session")
    assert kept is not None and kept["secure"] and kept["httpOnly"]

    browser.find_element(By.CSS_SELECTOR, "form.logout button").click()
    wait_until(lambda: "/login" in browser.current_url, 10, "the login page after logging out")
    browser.delete_all_cookies()
    browser.add_cookie({k: kept[k] for k in ("name", "value", "path", "secure", "httpOnly")})
    browser.get(f"{base}/dead")
    assert "/login" in browser.current_url  # the copy from before the logout opens nothing

    log_in(f"{base}/login?next=/%09/evil.example/login")  # the browser would drop the TAB
    wait_until(lambda: browser.current_url == f"{base}/", 10, "the overview, on this site")
