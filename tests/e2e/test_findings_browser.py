"""A finding dismissed in a browser (issue 46): headless Chromium (Debian's ``chromium`` and
``chromium-driver`` through selenium, as tests/e2e/test_dashboard_browser.py; nothing downloaded)
on ``docllm dashboard`` while a worker reviews on real Redis and MariaDB. The person picks a
reason, writes a note and dismisses the TODO finding on the task's page; the document is edited
around it and reviewed again: the new task's page shows it dismissed, and ``docllm check
--fail-on medium`` passes on the edited file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, docllm_argv, wait_until
from tests.e2e.test_dashboard_browser import browser  # noqa: F401 - the fixture
from tests.servers.ports import free_port, port_is_open

pytestmark = pytest.mark.e2e
QUOTE = "TODO: write the install steps."
GUIDE = f"# Guide\n\n{QUOTE}\n\n## Usage\n\nRun the tool with `--help` to see its options.\n"
# Edited around the finding: a paragraph above it (two lines lower, still under "Guide"), a line changed below.
EDITED = f"# Guide\n\nFor version 2.\n\n{QUOTE}\n\n## Usage\n\nRun the tool with `--help`.\n"


def succeeded(harness: Harness, probe: Probe, path: Path) -> int:
    [task] = harness.submit([path])
    wait_until(
        lambda: probe.rows(False).get(task["task_id"], {}).get("status") == "success",
        60,
        f"task {task['task_id']} to succeed",
        on_timeout=harness.dump,
    )
    return int(task["task_id"])


def test_a_finding_dismissed_in_the_browser_stays_dismissed_after_an_edit(
    harness: Harness,
    probe: Probe,
    browser,  # noqa: F811 - the fixture
    tmp_path: Path,
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    docs = tmp_path / "docs"
    docs.mkdir()
    guide = docs / "guide.md"
    guide.write_text(GUIDE)
    harness.worker("w1")
    port = free_port()
    harness.spawn("dashboard", [*docllm_argv(), "dashboard", "--port", str(port)], "dashboard")
    wait_until(lambda: port_is_open("127.0.0.1", port), 30, "the dashboard to listen", on_timeout=harness.dump)
    base = f"http://127.0.0.1:{port}"
    assert harness.cli("check", str(docs), "--fail-on", "medium", check=False).returncode == 1  # before

    first = succeeded(harness, probe, guide)
    browser.get(f"{base}/tasks/{first}")
    finding = browser.find_element(By.CSS_SELECTOR, "article.finding[data-number='1']")
    assert QUOTE in finding.text
    Select(finding.find_element(By.NAME, "reason")).select_by_value("accepted")
    finding.find_element(By.NAME, "note").send_keys("tracked in DOC-12")
    finding.find_element(By.CSS_SELECTOR, "form.dismiss button").click()
    wait_until(
        lambda: "finding 1 dismissed as accepted" in browser.find_element(By.CSS_SELECTOR, ".flash").text,
        10,
        "the dismissal's message",
    )
    section = browser.find_element(By.ID, "dismissed")
    assert QUOTE in section.text and "tracked in DOC-12" in section.text and "accepted" in section.text
    [mark] = harness.cli_json("findings", "list")
    assert (mark["reason"], mark["note"], mark["by"].startswith("dashboard:")) == (
        "accepted",
        "tracked in DOC-12",
        True,
    )

    guide.write_text(EDITED)
    second = succeeded(harness, probe, guide)
    browser.get(f"{base}/tasks/{second}")
    dismissed = browser.find_element(By.CSS_SELECTOR, "#dismissed article.finding")
    assert QUOTE in dismissed.text and "line 5" in dismissed.text  # the same finding, two lines lower
    assert not browser.find_elements(By.CSS_SELECTOR, ".severity article.finding")  # nothing else counts

    check = harness.cli("check", str(docs), "--fail-on", "medium", check=False)
    assert check.returncode == 0 and "[dismissed: accepted]" in check.stdout, check.stdout + check.stderr
