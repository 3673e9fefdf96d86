"""The review page in a real browser: Debian's headless chromium driven by Selenium through the system
chromedriver (never Selenium Manager: nothing is downloaded), against ``promptgym ui`` in a subprocess.

Each view is opened, used and photographed; the screenshots are checked (a PNG of the window's size,
the chart area drawn in the curves' colours). ``PROMPTGYM_UI_SCREENSHOTS=docs/images`` also keeps them.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

import pytest
from PIL import Image
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

import promptgym as pg
from promptgym.traces import TraceStore
from tests.cli.helpers import ROOT
from tests.ui.conftest import KEY, fill_store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("no system chromium/chromedriver (apt-get install -y chromium chromium-driver; .ci/run does)",
                allow_module_level=True)

WINDOW = (1280, 1000)


class Triage(pg.DataModel):
    """An output with every kind of field the correction form draws."""

    label: Literal["bug", "question", "feature"]
    urgent: bool
    tags: list[str]
    priority: int
    note: Optional[str] = None


KEY_ENV = "PROMPTGYM_UI_TEST_KEY"
CURVE_COLOURS = [(37, 99, 235), (220, 38, 38)]  # promptgym.ui.charts' first two series
WAIT_S = 20
HELD_OUT = {"n": 40, "program": "qa", "served": "served.json", "retrained": "beta", "verdict": "better",
            "before": {"reward": 0.1, "low": 0.04, "high": 0.23}, "after": {"reward": 0.8, "low": 0.65, "high": 0.9},
            "difference": {"difference": 0.7, "low": 0.55, "high": 0.82, "p_value": 1e-8, "wins": 28, "losses": 0}}


@pytest.fixture(scope="module")
def served(runs_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``promptgym ui`` on a free port over a copy of the runs (plus one still running) and a trace store."""
    folder = tmp_path_factory.mktemp("ui-browser")
    runs = folder / "runs"
    shutil.copytree(runs_dir, runs)
    live = runs / "20991231-000000-live-0000"
    alpha = next(path for path in runs.iterdir() if "alpha" in path.name)
    shutil.copytree(alpha, live)
    for name in ("best_program.json", "candidates.json", "summary.md"):
        (live / name).unlink()
    status = json.loads((live / "run.json").read_text())
    # This process's pid, recorded without its identity: `runs` reads the run as still running.
    status.update(id=live.name, name="live", status="running", pid=os.getpid(), process=None, final=None,
                  created=time.time())
    (live / "run.json").write_text(json.dumps(status))
    beta = next(path for path in runs.iterdir() if "beta" in path.name)
    (beta / "held_out.json").write_text(json.dumps(HELD_OUT))  # as `runs compare served.json BETA` keeps it
    with TraceStore(folder / "traces" / "traces.db") as store:
        ids = fill_store(store)
        store.describe_program("triage", "t1", input_schema={"type": "object"}, output_schema=Triage.model_json_schema())
        ids["triage"] = store.record(program="triage", version="t1", inputs={"text": "the page is blank"},
                                     outputs={"label": "question", "urgent": False, "tags": [], "priority": 3},
                                     created=1_800_000_200)
    process = subprocess.Popen(
        [sys.executable, "-m", "promptgym.cli.main", "ui", "--runs", str(runs), "--traces", str(folder / "traces"),
         "--port", "0", "--api-key-env", KEY_ENV],
        cwd=ROOT, env={**os.environ, KEY_ENV: KEY, "COLUMNS": "200"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        url, seen = None, []
        deadline = time.time() + 60
        while url is None and time.time() < deadline:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            seen.append(line)
            match = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
            url = match.group(1) if match else None
        assert url, "promptgym ui did not start:\n" + "".join(seen)
        yield {"url": url, "ids": ids, "store": folder / "traces" / "traces.db", "live": live}
    finally:
        process.terminate()  # our own child, by its pid
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert KEY not in "".join(seen) + (process.stdout.read() or "")  # the key never reaches the server's output


@pytest.fixture(scope="module")
def driver(served: dict[str, Any]) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--hide-scrollbars", "--force-device-scale-factor=1",
                 f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield browser
    finally:
        browser.quit()


def wait(driver: webdriver.Chrome, condition: Any, timeout: float = WAIT_S) -> Any:
    # A view re-renders as it loads: an element found a moment ago may be replaced, so look again.
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=[StaleElementReferenceException]).until(condition)


def visible(driver: webdriver.Chrome, css: str) -> Any:
    return wait(driver, EC.visibility_of_element_located((By.CSS_SELECTOR, css)))


def open_view(driver: webdriver.Chrome, url: str, view: str) -> None:
    driver.get(f"{url}/#{view}")
    if driver.find_element(By.ID, "key-form").is_displayed():
        driver.find_element(By.ID, "key-input").send_keys(KEY)
        driver.find_element(By.CSS_SELECTOR, "#key-form button").click()


def trace_rows(driver: webdriver.Chrome) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('#traces-table tr[data-trace]')]"
                                 ".map((row) => row.dataset.trace)")


def screenshot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> Image.Image:
    """The window as a checked PNG (its size is the window's), kept in docs when asked to."""
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
    image = Image.open(io.BytesIO(data)).convert("RGB")
    assert image.size == tuple(driver.execute_script("return [window.innerWidth, window.innerHeight]"))
    keep = os.environ.get("PROMPTGYM_UI_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / f"ui-{name}.png")
    return image


def curve_pixels(image: Image.Image, element: Any) -> int:
    """Pixels of the element's area in a curve's colour: 0 for a blank or missing chart."""
    rect = element.rect
    box = image.crop((int(rect["x"]), int(rect["y"]), int(rect["x"] + rect["width"]), int(rect["y"] + rect["height"])))
    return sum(1 for pixel in box.get_flattened_data()
               if any(sum(abs(a - b) for a, b in zip(pixel, colour)) < 40 for colour in CURVE_COLOURS))


def test_the_key_form_then_the_runs_a_run_s_curves_and_two_runs_side_by_side(
        driver: webdriver.Chrome, served: dict[str, Any], tmp_path: Path) -> None:
    driver.get(served["url"] + "/#/runs")
    visible(driver, "#key-form")  # no key yet: the API said 401 and the page asks
    driver.find_element(By.ID, "key-input").send_keys("not-the-key")
    driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait(driver, lambda d: "refused" in d.find_element(By.ID, "key-error").text)
    driver.find_element(By.ID, "key-input").clear()
    driver.find_element(By.ID, "key-input").send_keys(KEY)
    driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
    visible(driver, "#runs-table")
    names = [row.find_elements(By.TAG_NAME, "td")[2].text
             for row in driver.find_elements(By.CSS_SELECTOR, "#runs-table tr[data-run]")]
    assert names == ["live", "beta", "alpha"]
    screenshot(driver, tmp_path, "runs")

    beta = driver.find_element(By.CSS_SELECTOR, "#runs-table tr[data-run*=beta] a")
    beta.click()
    chart = visible(driver, "#chart svg")
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, '#chart g[data-series="val_reward"]')
         .get_attribute("data-points") == "3")
    visible(driver, "#comparisons")
    assert "kept" in driver.find_element(By.ID, "comparisons").text
    held_out = visible(driver, "#held-out-verdict").text  # served against this run, from `runs compare`
    assert "+0.700 [0.550, 0.820]" in held_out and "28 better, 0 worse" in held_out and "better" in held_out
    assert "0.800" in driver.find_element(By.ID, "held-out").text
    added = driver.find_elements(By.CSS_SELECTOR, "#variables .example.added")
    assert len(added) == 2 and "→" in added[0].text  # demonstrations the start did not have
    image = screenshot(driver, tmp_path, "run")
    assert curve_pixels(image, chart) > 300  # the curves are drawn, not a blank box

    open_view(driver, served["url"], "/runs")
    visible(driver, "#runs-table")
    for row in driver.find_elements(By.CSS_SELECTOR, "#runs-table tr[data-run]"):
        if "live" not in row.get_attribute("data-run"):
            row.find_element(By.CSS_SELECTOR, "input.pick").click()
    driver.find_element(By.ID, "compare").click()
    overlay = visible(driver, "#compare-chart svg")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#compare-chart g[data-series]")) == 2
    assert len(driver.find_elements(By.CSS_SELECTOR, ".compare-column .run-chart svg")) == 2
    assert driver.find_elements(By.CSS_SELECTOR, "#best-diff .variable")  # one run's best prompt against the other's
    assert [option.text for option in Select(driver.find_element(By.ID, "compare-series")).options] == [
        "val_reward", "reward"]
    image = screenshot(driver, tmp_path, "compare")
    assert curve_pixels(image, overlay) > 300


def test_a_running_run_s_curve_grows_as_the_run_writes(driver: webdriver.Chrome, served: dict[str, Any],
                                                       tmp_path: Path) -> None:
    open_view(driver, served["url"], f"/runs/{served['live'].name}")
    visible(driver, "#chart svg")
    points = lambda d: d.find_element(By.CSS_SELECTOR, '#chart g[data-series="val_reward"]').get_attribute("data-points")  # noqa: E731
    wait(driver, lambda d: points(d) == "2")
    assert driver.find_element(By.ID, "run-status").text == "running"
    history = served["live"] / "history.csv"
    last = history.read_text().splitlines()[-1].split(",")
    with history.open("a") as handle:
        handle.write(",".join(["2", last[1], "0.25", *last[3:]]) + "\n")
    wait(driver, lambda d: points(d) == "3")  # the page polls: no reload
    screenshot(driver, tmp_path, "live")


def test_rate_a_trace_then_a_bad_and_a_good_correction(driver: webdriver.Chrome, served: dict[str, Any],
                                                       tmp_path: Path) -> None:
    ids = served["ids"]
    open_view(driver, served["url"], "/traces")
    visible(driver, "#traces-table")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#traces-table tr[data-trace]")) == 5
    Select(driver.find_element(By.ID, "filter-rating")).select_by_value("good")
    wait(driver, lambda d: trace_rows(d) == [ids["right"]])
    Select(driver.find_element(By.ID, "filter-rating")).select_by_value("")
    wait(driver, lambda d: len(trace_rows(d)) == 5)
    Select(driver.find_element(By.ID, "filter-program")).select_by_visible_text("qa @ v2")
    wait(driver, lambda d: trace_rows(d) == [ids["v2"]])
    Select(driver.find_element(By.ID, "filter-program")).select_by_visible_text("qa @ v1")
    wait(driver, lambda d: trace_rows(d) == [ids["other"], ids["right"], ids["wrong"]])
    screenshot(driver, tmp_path, "traces")

    driver.find_element(By.CSS_SELECTOR, f'#traces-table tr[data-trace="{ids["wrong"]}"] a').click()
    visible(driver, "#correction-form")
    modules = driver.find_elements(By.CSS_SELECTOR, ".module")
    assert [module.find_element(By.TAG_NAME, "strong").text for module in modules] == ["1. think", "2. answerer"]
    driver.find_element(By.ID, "rate-bad").click()
    wait(driver, lambda d: d.find_element(By.ID, "current-rating").text == "bad")
    with TraceStore(served["store"]) as store:
        assert store.get(ids["wrong"]).rating == 0.0

    visible(driver, "#note").send_keys("the sum is off by one")
    driver.find_element(By.ID, "save-comment").click()
    wait(driver, lambda d: "the sum is off by one" in d.find_element(By.ID, "feedback").text)
    with TraceStore(served["store"]) as store:
        assert store.get(ids["wrong"]).comments == ["the sum is off by one"]

    answer = visible(driver, '[data-field="answer"]')
    answer.clear()  # a required field left empty: the server names it
    driver.find_element(By.ID, "save-correction").click()
    error = visible(driver, '[data-error-for="answer"]')
    wait(driver, lambda d: "required" in error.text)
    assert "invalid" in driver.find_element(By.CSS_SELECTOR, '[data-field-box="answer"]').get_attribute("class")
    answer.send_keys("4")
    confidence = driver.find_element(By.CSS_SELECTOR, '[data-field="confidence"]')
    confidence.clear()
    confidence.send_keys("very")
    driver.find_element(By.ID, "save-correction").click()
    wait(driver, lambda d: "is not of type 'number'" in d.find_element(By.CSS_SELECTOR, '[data-error-for="confidence"]').text)
    assert driver.find_element(By.CSS_SELECTOR, '[data-error-for="answer"]').text == ""
    screenshot(driver, tmp_path, "correction-error")
    with TraceStore(served["store"]) as store:
        assert store.get(ids["wrong"]).correction is None  # neither bad correction was stored

    confidence.clear()
    confidence.send_keys("1")
    driver.find_element(By.ID, "comment").send_keys("2+2 is 4")
    driver.find_element(By.ID, "save-correction").click()
    shown = visible(driver, "#current-correction pre")
    assert json.loads(shown.text) == {"answer": "4", "confidence": 1}
    screenshot(driver, tmp_path, "trace")
    with TraceStore(served["store"]) as store:
        trace = store.get(ids["wrong"])
    assert trace.correction == {"answer": "4", "confidence": 1}
    assert trace.comments == ["the sum is off by one", "2+2 is 4"]
    assert trace.rating == 0.0


def test_the_form_draws_each_kind_of_field_from_the_schema(driver: webdriver.Chrome, served: dict[str, Any],
                                                           tmp_path: Path) -> None:
    trace_id = served["ids"]["triage"]
    open_view(driver, served["url"], f"/traces/{trace_id}")
    visible(driver, "#correction-form")
    kinds = driver.execute_script("return Object.fromEntries([...document.querySelectorAll('[data-field]')]"
                                  ".map((input) => [input.dataset.field, input.dataset.kind]))")
    assert kinds == {"label": "enum", "urgent": "boolean", "tags": "json", "priority": "number", "note": "string"}
    assert Select(driver.find_element(By.ID, "field-label")).first_selected_option.text == "question"  # the output
    priority = driver.find_element(By.ID, "field-priority")
    priority.clear()
    priority.send_keys("1.5")
    driver.find_element(By.ID, "save-correction").click()
    wait(driver, lambda d: "is not of type 'integer'" in d.find_element(By.CSS_SELECTOR, '[data-error-for="priority"]').text)
    priority.clear()
    priority.send_keys("1")
    Select(driver.find_element(By.ID, "field-label")).select_by_visible_text("bug")
    Select(driver.find_element(By.ID, "field-urgent")).select_by_visible_text("true")
    tags = driver.find_element(By.ID, "field-tags")
    tags.clear()
    tags.send_keys('["rendering", "ui"]')
    driver.find_element(By.ID, "save-correction").click()
    visible(driver, "#current-correction")
    with TraceStore(served["store"]) as store:
        assert store.get(trace_id).correction == {"label": "bug", "urgent": True, "tags": ["rendering", "ui"],
                                                  "priority": 1}  # the empty optional note is not sent
    screenshot(driver, tmp_path, "form-kinds")
