"""The landing page and the inspector (GET /, GET /inspector#<id>) in headless Chromium against a
live server: create a counter from the landing page, send an action from the form, step back in
time and read the diff, see a refused action's problem and a failed mutation in the log, delete
the instance and see the stream end.

Screenshots go to $INSPECTOR_ARTIFACTS (default .build/inspector-artifacts/). With
INSPECTOR_UPDATE_DOCS=1 the walkthrough's screenshot also replaces docs/inspector.png.

Needs Debian's `chromium` and `chromium-driver` (`make test-deps` installs them) and selenium
(requirements-test.txt); the tests fail, rather than skip, without them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from faults_support import wait_for

ARTIFACTS = Path(os.environ.get("INSPECTOR_ARTIFACTS") or REPO_ROOT / ".build" / "inspector-artifacts")
DOCS_SCREENSHOT = REPO_ROOT / "docs" / "inspector.png"
WAIT_S = 10


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: `make venv` installs requirements-test.txt")
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.fail("chromium and chromedriver are needed: `make test-deps` installs chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1000", "--lang=en-GB", "--no-first-run"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium keeps a directory of its own in TMPDIR and leaves it there: among this run's files.
    service = Service(executable_path=chromedriver,
                      env={**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("chromium"))})
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(WAIT_S)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


class Page:
    """The browser, with bounded waits and reads that do not hold on to re-rendered elements."""

    def __init__(self, driver) -> None:
        self.driver = driver

    def text(self, css: str) -> str | None:
        return self.driver.execute_script(
            "const node = document.querySelector(arguments[0]); return node ? node.textContent : null;", css)

    def texts(self, css: str) -> list[str]:
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((node) => node.textContent);", css)

    def attribute(self, css: str, name: str) -> list[str | None]:
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((node) => node.getAttribute(arguments[1]));",
            css, name)

    def until(self, predicate, what: str):
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        wait = WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException,))
        try:
            return wait.until(lambda _: predicate())
        except Exception as error:
            self.screenshot("failed")
            raise AssertionError(f"not within {WAIT_S}s: {what}\n{self.text('body')}") from error

    def until_text(self, css: str, expected: str) -> None:
        self.until(lambda: (self.text(css) or "").strip() == expected, f"{css} reads {expected!r} (reads {self.text(css)!r})")

    def click(self, css: str) -> None:
        """Clicks what `css` selects once it is there, again if a render replaced it meanwhile."""
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.common.by import By

        def clicked():
            try:
                self.driver.find_element(By.CSS_SELECTOR, css).click()
                return True
            except (NoSuchElementException, StaleElementReferenceException):
                return False
        self.until(clicked, f"{css} to click")

    def element(self, css: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def screenshot(self, name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def policy_violations(self) -> list[str]:
        return [entry["message"] for entry in self.driver.get_log("browser")
                if "Content Security Policy" in entry["message"] or "Uncaught" in entry["message"]]


@pytest.fixture
def page(browser):
    browser.get_log("browser")  # starts each test with an empty console
    return Page(browser)


def open_inspector(page: Page, server, instance_id: str) -> None:
    page.driver.get(f"{server.base}/inspector#{instance_id}")
    page.until_text("#connection", "live")
    page.until(lambda: page.attribute("#timeline li", "data-version"), "the first version in the timeline")


def kept_versions(server, instance_id: str) -> dict:
    reply = server.request("GET", f"/reactors/{instance_id}/history")
    assert reply.status == 200, reply
    return reply.json()


def test_the_landing_page_creates_with_the_parameters_typed_in_and_shows_their_refusal(server, page):
    page.driver.get(server.base + "/")
    field = '#types li[data-type="counter"] textarea.parameters-json'
    page.until(lambda: page.attribute(field, "class"), "the counter's parameters field")
    # Filled with the example parameters GET /types shows.
    assert json.loads(page.element(field).get_attribute("value")) == {"step": 1}
    created_before = server.metric("reactor_instances")
    page.element(field).clear()
    page.element(field).send_keys('{"step": "big"}')
    page.click('#types li[data-type="counter"] button')
    page.until(lambda: "invalid creation parameters" in (page.text("#status") or "").lower(), "the refusal shown")
    assert "step" in page.text("#status")
    assert server.metric("reactor_instances") == created_before
    page.element(field).clear()
    page.element(field).send_keys('{"step": 5}')
    page.click('#types li[data-type="counter"] button')
    page.until(lambda: "/inspector#" in page.driver.current_url, "the inspector opened")
    instance_id = page.driver.current_url.split("#", 1)[1]
    reply = server.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
    assert reply.status == 200 and reply.json()["state"]["value"] == 5, reply


def test_create_send_travel_refuse_delete(server, page):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    # The landing page lists the types; "Create and inspect" on counter opens its inspector.
    page.driver.get(server.base + "/")
    page.until(lambda: "counter" in page.attribute("#types > li", "data-type"), "the counter type listed")
    assert set(page.attribute("#types > li", "data-type")) == {"counter", "todo", "search", "room"}
    page.screenshot("0-landing")
    page.click('#types li[data-type="counter"] button')
    page.until(lambda: "/inspector#" in page.driver.current_url, "the inspector opened")
    instance_id = page.driver.current_url.split("#", 1)[1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", instance_id)
    page.until_text("#connection", "live")
    page.until_text("#instance-type", "counter")
    assert page.text("#instance-id") == instance_id
    page.until(lambda: page.attribute("#timeline li", "data-version") == ["0"], "version 0 in the timeline")
    assert page.text('#state-tree [data-path="/value"]') == "0"
    assert page.text('#state-tree [data-path="/alertMessage/count"]') == "pulse · count 0"

    # Send the "increase" example from the form: four versions, each produced by action 1.
    page.until(lambda: '"increase"' in page.attribute("#example option", "value"), "the counter's examples")
    Select(page.element("#example")).select_by_value('"increase"')
    assert page.element("#action-json").get_attribute("value") == '"increase"'
    page.click("#send")
    page.until_text("#send-result", "Accepted as action #1.")
    page.until(lambda: page.attribute("#timeline li", "data-version")[:1] == ["4"]
               and page.attribute("#timeline li", "data-seq") == ["1"] * 4 + [None],
               "versions 1–4 from action 1 in the timeline")
    history = kept_versions(server, instance_id)
    assert [entry["version"] for entry in history["versions"]] == [0, 1, 2, 3, 4]
    assert page.attribute("#timeline li", "data-version") == ["4", "3", "2", "1", "0"]
    assert page.text('#state-tree [data-path="/value"]') == "1"
    assert page.text('#state-tree [data-path="/isLoading"]') == "false"
    assert page.text('#state-tree [data-path="/alertMessage/count"]') == "pulse · count 1"
    page.until(lambda: page.attribute("#actions li", "data-seq") == ["1"], "action 1 in the log")
    entry = page.text('#actions li[data-seq="1"]')
    assert '#1 "increase"' in entry and "versions 1–4" in entry, entry
    # The last version's change is marked in the tree and listed.
    last_change = [change["path"] for change in diff_paths(history["versions"][3]["state"], history["versions"][4]["state"])]
    assert page.attribute("#diff li", "data-path") == last_change
    assert "viewing version 4" in page.text("#viewing").lower()
    page.screenshot("1-after-increase")

    # Step back with the keyboard: the slider shows version 3, its change from version 2 marked.
    page.element("#version-slider").send_keys(Keys.ARROW_LEFT)
    page.until(lambda: page.text("#viewing").startswith("Viewing version 3 "), "version 3 on screen")
    assert page.attribute("#timeline li.selected", "data-version") == ["3"]
    assert page.element("#follow").get_attribute("aria-pressed") == "false"
    changes = diff_paths(history["versions"][2]["state"], history["versions"][3]["state"])
    assert changes and page.attribute("#diff li", "data-path") == [change["path"] for change in changes]
    for change in changes:
        marked = page.attribute(f'#state-tree [data-path="{change["path"]}"]', "class")
        assert marked and f"mark-{change['kind']}" in marked[0], (change, marked)
    assert page.text("#diff-heading") == "Changes from version 2 to 3"

    # Any two versions: the latest against version 0 marks value, isLoading unchanged.
    Select(page.element("#base-select")).select_by_value("0")
    page.element("#version-slider").send_keys(Keys.END)
    page.until(lambda: page.text("#diff-heading") == "Changes from version 0 to 4", "the diff from version 0 to 4")
    assert set(page.attribute("#diff li", "data-path")) == {"/value", "/alertMessage/value", "/alertMessage/count"}
    assert "mark-changed" in page.attribute('#state-tree [data-path="/value"]', "class")[0]
    assert "mark-changed" not in (page.attribute('#state-tree [data-path="/isLoading"]', "class")[0] or "")
    value_change = page.text('#diff li[data-path="/value"]')
    assert "0" in value_change and "→" in value_change and value_change.endswith("1"), value_change
    # A version from the list.
    page.click('#timeline li[data-version="1"] button')
    page.until(lambda: page.text("#viewing").startswith("Viewing version 1 "), "version 1 from the list")
    assert page.text('#state-tree [data-path="/isLoading"]') == "true"
    page.click("#follow")
    page.until(lambda: page.text("#viewing").endswith("following live."), "following live again")

    # A hand-written action the counter does not know: the problem is shown.
    textarea = page.element("#action-json")
    textarea.clear()
    textarea.send_keys('"fly"')
    assert page.element("#example").get_attribute("value") == ""
    page.click("#send")
    page.until(lambda: page.text("#send-result .problem-status") == "400", "the problem's status")
    assert page.text("#send-result .problem-title") == "Invalid action"
    assert "fly" in page.text("#send-result .problem-detail")
    assert page.text("#send-result .problem-type") == "urn:reactor-server:problem:invalid-action"
    assert page.attribute("#actions li", "data-seq") == ["1"]
    shot = page.screenshot("2-refused")
    if os.environ.get("INSPECTOR_UPDATE_DOCS") == "1":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, DOCS_SCREENSHOT)
    page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    page.screenshot("3-dark")
    page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

    # Delete, confirmed in the dialog: the stream ends with "deleted".
    page.click("#delete")
    page.until(lambda: page.driver.execute_script("return document.getElementById('delete-dialog').open"),
               "the delete dialog open")
    page.click("#delete-confirm")
    page.until_text("#connection", "ended: deleted")
    assert server.request("GET", f"/reactors/{instance_id}").status == 404
    assert page.element("#send").get_attribute("disabled") is not None
    page.screenshot("4-deleted")
    assert page.policy_violations() == []


def test_failed_mutation_is_marked_in_the_log(server, page):
    from selenium.webdriver.support.ui import Select

    instance_id = server.create("todo")["id"]
    open_inspector(page, server, instance_id)
    page.until(lambda: '{"toggle":{"id":"task-id"}}' in page.attribute("#example option", "value"), "the todo examples")
    Select(page.element("#example")).select_by_value('{"toggle":{"id":"task-id"}}')
    page.click("#send")
    page.until_text("#send-result", "Accepted as action #1.")
    page.until(lambda: "failed" in (page.attribute('#actions li[data-seq="1"]', "class") or [""])[0],
               "action 1 marked as failed")
    note = page.text('#actions li[data-seq="1"] .error-note')
    assert note.startswith("Mutation failed: ") and "task-id" in note, note
    assert page.text('#actions li[data-seq="1"] .failed-badge') == "failed"
    page.screenshot("5-failed-mutation")
    assert server.request("DELETE", f"/reactors/{instance_id}").status == 204
    page.until_text("#connection", "ended: deleted")


def test_unknown_or_missing_id(server, page):
    page.driver.get(f"{server.base}/inspector#AAAAAAAAAAAAAAAAAAAAAA")
    page.until_text("#connection", "ended: not found")
    page.driver.get(f"{server.base}/inspector")
    page.until(lambda: page.driver.execute_script("return !document.getElementById('missing').hidden"),
               "the missing-id notice")
    assert page.element("#delete").get_attribute("disabled") is not None
    assert page.policy_violations() == []


def test_connection_reconnecting_and_shutdown(start_server, page):
    # A server gone without a word: EventSource retries, resuming after the last version.
    crashed = start_server()
    open_inspector(page, crashed, crashed.create()["id"])
    crashed.signal(signal.SIGKILL)
    page.until_text("#connection", "reconnecting (Last-Event-ID 0)")
    assert page.element("#reconnect").is_displayed() is False
    # A server that stops: the stream ends with its reason, and the page offers to reconnect.
    stopped = start_server()
    open_inspector(page, stopped, stopped.create()["id"])
    stopped.signal(signal.SIGTERM)
    page.until_text("#connection", "ended: shutdown")
    assert page.element("#reconnect").is_displayed()
    page.screenshot("6-shutdown")


def watch_and_increase(server, counter: str) -> None:
    """Sends `increase` with an event stream open, so the store keeps each of the action's four
    versions (an unwatched session's commit keeps only its last) for the pages to show after a
    restart."""
    stream = server.events(counter)
    try:
        assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    finally:
        stream.close()


def test_a_server_gone_back_to_an_earlier_version_is_followed(start_server, page, tmp_path):
    """A backup restored in place of a lost store takes an instance back from version 8 to 4:
    the page, reconnecting after version 8, drops what it kept after 4 and follows the instance
    from there."""
    import subprocess
    from conftest import server_binary
    server = start_server("--counter-delay-ms", "0")
    counter = server.create()["id"]
    watch_and_increase(server, counter)
    backup = tmp_path / "backup.sqlite"
    taken = subprocess.run([str(server_binary()), "backup", "--store", server.store, str(backup)],
                           capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0, taken.stderr
    assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    open_inspector(page, server, counter)
    page.until(lambda: "8" in page.attribute("#timeline li", "data-version"), "version 8 in the timeline")

    server.signal(signal.SIGKILL)  # EventSource retries on its own, after version 8
    server.wait(timeout=10)
    page.until_text("#connection", "reconnecting (Last-Event-ID 8)")
    store_path = Path(server.store.removeprefix("sqlite:"))
    for lost in [store_path, Path(f"{store_path}-wal"), Path(f"{store_path}-shm")]:
        lost.unlink(missing_ok=True)
    restored = subprocess.run([str(server_binary()), "restore", "--store", server.store, str(backup)],
                              capture_output=True, text=True, timeout=60)
    assert restored.returncode == 0, restored.stderr
    again = start_server("--counter-delay-ms", "0", "--port", str(server.port), store=server.store)
    page.until_text("#connection", "live")
    page.until(lambda: page.attribute("#timeline li", "data-version") == [str(v) for v in range(4, -1, -1)],
               "the timeline to end at version 4")
    page.until(lambda: page.text('#state-tree [data-path="/value"]') == "1", "the state of version 4")
    assert again.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    page.until(lambda: page.attribute("#timeline li", "data-version") == [str(v) for v in range(8, -1, -1)],
               "the new versions 5 to 8")
    page.until(lambda: page.text('#state-tree [data-path="/value"]') == "2", "the state of the new version 8")
    assert page.policy_violations() == []


def test_versions_a_crash_lost_leave_the_timeline_when_the_page_reconnects(start_server, page):
    """With async durability, versions 5 to 8 are shown and lost in a crash: the instance comes
    back past them (at version 65,541), and the page, reconnecting, drops them from its timeline."""
    server = start_server("--counter-delay-ms", "0")
    counter = server.create()["id"]
    watch_and_increase(server, counter)
    assert server.stop() == 0
    shown_ahead = start_server("--counter-delay-ms", "0", "--durability", "async", "--flush-interval-ms", "60000",
                               "--port", str(server.port), store=server.store)
    open_inspector(page, shown_ahead, counter)
    # The activation's mark is committed before anything new is shown.
    wait_for(lambda: shown_ahead.metric("reactor_store_writes_total") >= 1, timeout=10, what="the activation's commit")
    assert shown_ahead.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    page.until(lambda: page.attribute("#timeline li", "data-version") == [str(v) for v in range(8, -1, -1)],
               "versions 5 to 8 in the timeline")

    shown_ahead.signal(signal.SIGKILL)
    shown_ahead.wait(timeout=10)
    page.until_text("#connection", "reconnecting (Last-Event-ID 8)")
    start_server("--counter-delay-ms", "0", "--port", str(server.port), store=server.store)
    page.until_text("#connection", "live")
    skipped = [str(4 + 65_537)] + [str(v) for v in range(4, -1, -1)]
    page.until(lambda: page.attribute("#timeline li", "data-version") == skipped,
               "the timeline without the lost versions")
    page.until(lambda: page.text('#state-tree [data-path="/value"]') == "1", "the committed state")
    assert page.policy_violations() == []


def diff_paths(before, after, path: str = "") -> list[dict]:
    """The page's diff, independently: {kind, path} for each differing path, objects by key in the
    page's order (removed keys first, then the new object's keys), arrays by index."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = [{"kind": "removed", "path": f"{path}/{key}"} for key in before if key not in after]
        for key in after:
            out += ([{"kind": "added", "path": f"{path}/{key}"}] if key not in before
                    else diff_paths(before[key], after[key], f"{path}/{key}"))
        return out
    if isinstance(before, list) and isinstance(after, list):
        out = []
        for index in range(max(len(before), len(after))):
            if index >= len(before):
                out.append({"kind": "added", "path": f"{path}/{index}"})
            elif index >= len(after):
                out.append({"kind": "removed", "path": f"{path}/{index}"})
            else:
                out += diff_paths(before[index], after[index], f"{path}/{index}")
        return out
    return [] if before == after and type(before) is type(after) else [{"kind": "changed", "path": path}]


def test_the_pages_send_the_token_a_server_asks_for(start_server, page, tmp_path):
    """Against `--auth jwt --auth-query-token`: without a token the landing page asks for one and
    creates nothing; with one typed into its Token field, every fetch carries it as a bearer token
    and the inspector's event stream as `access_token`, so the session is created, streamed and
    driven as its owner's, and another subject's token does not reach it."""
    import time

    import jwt

    secret = os.urandom(32).hex()
    (tmp_path / "secret").write_text(secret)
    server = start_server("--auth", "jwt", "--jwt-secret-file", str(tmp_path / "secret"), "--auth-query-token")

    def token(subject: str) -> str:
        return jwt.encode({"sub": subject, "exp": int(time.time()) + 600}, secret.encode(), algorithm="HS256")

    page.driver.get(server.base + "/")
    page.until(lambda: "counter" in page.attribute("#types > li", "data-type"), "the counter type listed")
    page.click('#types li[data-type="counter"] button')
    page.until(lambda: "needs a token" in (page.text("#status") or ""), "the page asking for a token")
    assert "/inspector#" not in page.driver.current_url

    from selenium.webdriver.common.keys import Keys

    page.element("#token").send_keys(token("alice"), Keys.ENTER)
    page.click('#types li[data-type="counter"] button')
    page.until(lambda: "/inspector#" in page.driver.current_url, "the inspector opened")
    instance_id = page.driver.current_url.split("#", 1)[1]
    page.until_text("#connection", "live")
    from selenium.webdriver.support.ui import Select

    page.until(lambda: '"increase"' in page.attribute("#example option", "value"), "the counter's examples")
    Select(page.element("#example")).select_by_value('"increase"')
    page.click("#send")
    page.until_text("#send-result", "Accepted as action #1.")
    page.until(lambda: page.attribute("#timeline li", "data-version")[:1] == ["4"], "the stream showing version 4")
    reply = server.request("GET", f"/reactors/{instance_id}", headers={"Authorization": f"Bearer {token('alice')}"})
    assert reply.status == 200 and reply.json()["state"]["value"] == 1, reply
    assert server.request("GET", f"/reactors/{instance_id}",
                          headers={"Authorization": f"Bearer {token('bob')}"}).status == 404
    assert page.policy_violations() == []
