"""The web page in real headless Chromium (Debian's chromium and chromedriver, through selenium) against a running
mesh: the nodes, a taint added through the form, an actor pending because of it, the taint removed and the actor
placed, all seen live; the page without the script (its HTML and its form posts); every value escaped.

Screenshots go to $CORRAL_TEST_ARTEFACTS (default tests/artefacts/, ignored by git)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import Select, WebDriverWait

from services.cli.mesh import Mesh
from services.client import SyncClient
from services.testing.servers import ServerPath
from tests.integration.gateway import AUTH, TOKEN, gateway_mesh, http_base

pytestmark = [pytest.mark.integration]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTEFACTS = Path(os.environ.get("CORRAL_TEST_ARTEFACTS") or Path(__file__).parents[1] / "artefacts")
HOSTILE = "<script>window.pwned=1</script>"
"""A resource name (free text: ids and resource names are any string without blanks) the page must escape."""
WAIT = 15.0


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """A mesh with the gateway (its token set) for this module."""
    with gateway_mesh(tmp_path_factory.mktemp("web") / "mesh", server_path) as running:
        yield running


@pytest.fixture(scope="module")
def corral(mesh: Mesh) -> Iterator[SyncClient]:
    """A Python client of the same mesh: nodes to show, and what the page's forms did."""
    with SyncClient(mesh.nats_url, timeout=10.0) as client:
        yield client


@pytest.fixture
def http(mesh: Mesh) -> Iterator[httpx.Client]:
    """An HTTP client of the gateway: a browser without JavaScript."""
    with httpx.Client(base_url=http_base(mesh), timeout=15.0, headers={"Accept": "text/html"}) as client:
        yield client


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """Headless Chromium, from the system's packages (selenium-manager downloads nothing), its profile in the test's
    own folder (tests on other xdist workers run browsers of their own)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if os.geteuid() == 0:
            pytest.fail("chromium and chromedriver are missing: `make chromium` installs them (make test does)")
        pytest.skip("chromium and chromedriver are not installed, and only root can install them (make chromium)")
    os.environ["SE_OFFLINE"] = "true"  # selenium-manager must not look for a browser or a driver to download
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = f"--user-data-dir={tmp_path / 'chromium'}"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,860", profile):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console: Content-Security-Policy reports
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: WebDriver, name: str) -> None:
    """Keep what the browser shows as a test artefact."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


def click(wait: WebDriverWait[WebDriver], selector: str) -> None:
    """Click what the selector finds, again if a live refresh replaced it between finding and clicking."""

    def clicked(driver: WebDriver) -> bool:
        driver.find_element(By.CSS_SELECTOR, selector).click()
        return True

    wait.until(clicked)


def test_the_page_adds_a_taint_the_waiting_actors_reason_changes_and_removing_the_taints_places_it(
    browser: WebDriver, mesh: Mesh, corral: SyncClient, http: httpx.Client
) -> None:
    driver = browser
    corral.register_node("w1", {"CPU": 4, "slot": 1}, labels={"disk": "ssd"}, taints={"maint": "now"}, heartbeat=False)
    corral.register_node("w2", {"CPU": 8, "memory": 16e9}, labels={"zone": "z2"}, heartbeat=False)
    assert http.post("/api/v1/actors", json={"actor_id": "w-busy", "resources": {"CPU": 6}}, headers=AUTH).is_success
    waiting = http.post("/api/v1/actors", json={"actor_id": "w-slot", "resources": {"slot": 1}}, headers=AUTH).json()
    assert waiting["type"] == "pending"  # only w1 has a slot, and it is tainted maint=now
    wait = WebDriverWait(driver, WAIT, ignored_exceptions=[StaleElementReferenceException])

    driver.get(http_base(mesh) + "/")
    wait.until(shown.text_to_be_present_in_element((By.ID, "live"), "live"))
    assert {"w1", "w2"} <= {card.get_attribute("data-node") for card in driver.find_elements(By.CSS_SELECTOR, ".node")}
    assert "6 / 8" in driver.find_element(By.ID, "node-w2").text
    assert "untolerated taint {maint: now}" in driver.find_element(By.ID, "pending-w-slot").text
    driver.find_element(By.ID, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    assert driver.execute_script("return sessionStorage.getItem('corral-token')") == TOKEN
    assert driver.get_cookies() == []

    form = driver.find_element(By.CSS_SELECTOR, "#node-w1 form.add-taint")
    form.find_element(By.NAME, "key").send_keys("gpu_node")
    form.find_element(By.NAME, "value").send_keys("true")
    Select(form.find_element(By.NAME, "effect")).select_by_value("NoSchedule")
    form.find_element(By.CSS_SELECTOR, "button").click()
    wait.until(shown.text_to_be_present_in_element((By.CSS_SELECTOR, "#node-w1 .taints"), "gpu_node=true:NoSchedule"))
    assert sorted(taint.key for taint in corral.taints("w1")["w1"]) == ["gpu_node", "maint"]
    assert "tainted" in driver.find_element(By.CSS_SELECTOR, "#node-w1 .state").text
    screenshot(driver, "page-taint-added")

    click(wait, "#node-w1 form.taint[data-key='maint'] button")  # the first taint goes: the reason is the new one
    wait.until(shown.text_to_be_present_in_element((By.ID, "pending-w-slot"), "untolerated taint {gpu_node: true}"))
    pending = driver.find_element(By.ID, "pending-w-slot")
    assert "w1" in [chip.text for chip in pending.find_elements(By.CSS_SELECTOR, ".chip.id")]
    screenshot(driver, "page-reason-changed")

    click(wait, "#node-w1 form.taint[data-key='gpu_node'] button")
    wait.until(shown.invisibility_of_element_located((By.ID, "pending-w-slot")))
    assert corral.wait_placed("w-slot").node_id == "w1"
    wait.until(shown.text_to_be_present_in_element((By.ID, "node-w1"), "1 / 1"))
    assert driver.find_elements(By.CSS_SELECTOR, "#node-w1 .chip.taint") == []
    assert "alive" in driver.find_element(By.CSS_SELECTOR, "#node-w1 .state").text
    screenshot(driver, "page-taint-removed")
    fills = driver.find_elements(By.CSS_SELECTOR, "#node-w2 .fill")  # CPU 6 / 8: its bar's width is a style attribute
    assert max(float(fill.value_of_css_property("width").removesuffix("px")) for fill in fills) > 0
    console = driver.execute("getLog", {"type": "browser"})["value"]  # Chromium's console (ChromiumDriver.get_log)
    refused = [entry["message"] for entry in console if "Content Security Policy" in entry["message"]]
    assert refused == [], refused  # the page's own script, stylesheet and bar widths all pass the policy


def test_without_the_script_the_page_lists_the_cluster_and_its_forms_change_it(
    http: httpx.Client, corral: SyncClient
) -> None:
    corral.register_node("f1", {"CPU": 2}, labels={"rack": "r1"}, heartbeat=False)
    page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="node-f1"' in page.text and "rack=r1" in page.text and 'name="token"' in page.text

    form = {"node_id": "f1", "key": "maint", "value": "now", "effect": "NoExecute"}
    refused = http.post("/ui/taints/add", data={**form, "token": "wrong"})
    assert refused.status_code == 303 and "error=" in refused.headers["location"]
    assert corral.taints("f1") in ({}, {"f1": []})
    assert "wrong or missing token" in http.get(refused.headers["location"]).text

    added = http.post("/ui/taints/add", data={**form, "token": TOKEN})
    assert (added.status_code, added.headers["location"]) == (303, "/#node-f1")
    http.post("/ui/taints/add", data={**form, "effect": "NoSchedule", "token": TOKEN})
    assert {taint.effect for taint in corral.taints("f1")["f1"]} == {"NoExecute", "NoSchedule"}
    assert "maint=now:NoExecute" in http.get("/").text

    removed = http.post(
        "/ui/taints/remove", data={"node_id": "f1", "key": "maint", "effect": "NoExecute", "token": TOKEN}
    )
    assert removed.status_code == 303
    assert [(taint.key, taint.effect) for taint in corral.taints("f1")["f1"]] == [("maint", "NoSchedule")]

    bad = http.post("/ui/taints/add", data={"node_id": "f1", "key": "bad key!", "token": TOKEN})
    assert bad.status_code == 303 and "bad%20key%21" in bad.headers["location"]
    foreign = http.post("/ui/taints/add", data={**form, "token": TOKEN}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert [(taint.key, taint.effect) for taint in corral.taints("f1")["f1"]] == [("maint", "NoSchedule")]


def test_every_value_on_the_page_is_escaped(
    browser: WebDriver, mesh: Mesh, http: httpx.Client, corral: SyncClient
) -> None:
    hostile_id = "<img/src=x/onerror=window.pwned=2>"
    corral.register_node("x1", {HOSTILE: 1}, address='"><b>bold</b>', heartbeat=False)
    work = {"actor_id": hostile_id, "resources": {"CPU": 1000}}
    assert http.post("/api/v1/actors", json=work, headers=AUTH).json()["type"] == "pending"
    refused = http.put("/api/v1/nodes/w2/labels", json={"app": "<script>"}, headers=AUTH)
    assert refused.status_code == 400  # a label value cannot carry markup: the labels service refuses it

    page = http.get("/", params={"error": HOSTILE})
    assert HOSTILE not in page.text and hostile_id not in page.text and "<b>bold</b>" not in page.text
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page.text and "&lt;b&gt;bold" in page.text
    assert HOSTILE not in http.get("/ui/nodes").text

    browser.get(http_base(mesh) + "/?error=" + HOSTILE)
    assert HOSTILE in browser.find_element(By.ID, "node-x1").text
    assert hostile_id in browser.find_element(By.CSS_SELECTOR, f'article.pending[data-work="{hostile_id}"]').text
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, ".flash.error").text
    assert browser.execute_script("return window.pwned === undefined")
