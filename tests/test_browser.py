"""The widget panel in a real browser: JupyterLab + Playwright driving the system Chromium (docs/architecture.md#testing).

JupyterLab runs on 127.0.0.1 with a token, a throw-away root holding a copy of
runbooks/triage.ipynb and throw-away Jupyter config, data, runtime, settings and
cache folders. Nothing reaches the network: the news feed and update check are
off (``--LabApp.news_url=``, ``NeverCheckForUpdate``, the announcements plugin
disabled, https://jupyterlab.readthedocs.io/en/stable/user/announcements.html),
and Chromium runs with background networking, component updates and sync off.
Playwright never downloads a browser: it starts /usr/bin/chromium (Debian
package ``chromium``; ``./dev test`` installs it).

The test opens the notebook unedited, runs all cells, picks a bundled scenario
in the panel, presses Run all, and checks that the scenario's expected root
cause is shown. Screenshots go to ``test-artifacts/`` (and /tmp/shots/ when it exists).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakeapi import FakeApiServer, write_kubeconfig
from playwright.sync_api import Locator, Page, expect, sync_playwright

from nbhelpers.findings.catalog import CATALOG
from nbhelpers.notebook.widgets import scenario_label
from nbhelpers.render.symptoms import SYMPTOMS, step_heading
from nbhelpers.scenarios import load_spec

ROOT = Path(__file__).parents[1]
CLUSTER_FIXTURES = Path(__file__).parent / "fixtures" / "cluster"
RUNBOOK = ROOT / "runbooks" / "triage.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
LEAD_SHOTS = Path("/tmp/shots")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCENARIO = "host-oom"  # not the panel's default (port-mismatch), so the test proves the picker works
SERVER_START_SECONDS = 60
STEP_TIMEOUT_MS = 60_000

# One browser at a time: under pytest-xdist the browser tests share a worker (--dist loadgroup).
pytestmark = [pytest.mark.notebook, pytest.mark.timeout(180), pytest.mark.xdist_group("browser")]


@dataclass(frozen=True)
class Lab:
    url: str
    token: str


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _write_settings(base: Path) -> dict[str, Path]:
    """Jupyter folders for an isolated, offline JupyterLab; settings that keep every cell in the page."""
    folders = {
        name: base / name for name in ("config", "data", "runtime", "settings", "workspaces", "cache", "ipython")
    }
    for folder in folders.values():
        folder.mkdir(parents=True)
    (folders["config"] / "labconfig").mkdir()
    (folders["config"] / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    notification = folders["settings"] / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    notebook = folders["settings"] / "@jupyterlab" / "notebook-extension"
    notebook.mkdir(parents=True)
    # Without windowing every cell stays in the DOM, so output far down the notebook can be asserted.
    (notebook / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    return folders


def _wait_until_serving(url: str, token: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise AssertionError(f"JupyterLab did not answer within {SERVER_START_SECONDS} s:\n{log.read_text()[-3000:]}")


def require_chromium() -> None:
    """Like the Prometheus harness: a missing browser fails the run in CI and skips the test elsewhere."""
    if CHROMIUM.exists():
        return
    message = "Chromium is not installed: apt-get install --no-install-recommends chromium (./dev test does it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def lab(tmp_path: Path, fake_api: FakeApiServer) -> Iterator[Lab]:
    """JupyterLab whose kernels see a kubeconfig for the fixture API server (InferenceServices in llm and raw)."""
    require_chromium()
    fake_api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless", CLUSTER_FIXTURES / "raw")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake_api.url, token=fake_api.token, namespace="raw")
    folders = _write_settings(tmp_path / "jupyter")
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(RUNBOOK, root / "triage.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    environment = {key: value for key, value in os.environ.items() if key not in ("KUBECONFIG", "JPY_SESSION_NAME")} | {
        "HOME": str(tmp_path / "home"),
        "KUBECONFIG": str(kubeconfig),
        "JUPYTER_CONFIG_DIR": str(folders["config"]),
        "JUPYTER_DATA_DIR": str(folders["data"]),
        "JUPYTER_RUNTIME_DIR": str(folders["runtime"]),
        "XDG_CACHE_HOME": str(folders["cache"]),
        "IPYTHONDIR": str(folders["ipython"]),
    }
    log = tmp_path / "jupyterlab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--LabApp.user_settings_dir={folders['settings']}",
        f"--LabApp.workspaces_dir={folders['workspaces']}",
        "--LabApp.extension_manager=readonly",  # the default, "pypi", would query PyPI
        "--LabApp.expose_app_in_browser=True",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]
    with log.open("wb") as output:
        server = subprocess.Popen(
            command, cwd=root, env=environment, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(url, token, server, log)
        yield Lab(url, token)
    finally:
        _stop_group(server)


def _stop_group(server: subprocess.Popen[bytes]) -> None:
    """Stop the server and the kernels it started: they share the session we gave it, and only they do."""
    for stop_signal, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, stop_signal)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _scroll_to_top(element: Locator) -> None:
    element.evaluate("node => node.scrollIntoView({block: 'start'})")


def _save(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"widgets-{name}"
    page.screenshot(path=str(path))
    if LEAD_SHOTS.is_dir():
        shutil.copy(path, LEAD_SHOTS / path.name)
    return path


def test_run_all_from_the_panel_shows_the_root_cause(lab: Lab) -> None:
    expected = load_spec(SCENARIO).expected_root_causes[0]
    step = CATALOG[expected].step
    began = time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            errors: list[str] = []  # a chart vega cannot draw only shows here
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{lab.url}/lab/tree/triage.ipynb?token={lab.token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=STEP_TIMEOUT_MS)
            page.wait_for_function(
                "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                " && window.jupyterapp.shell.currentWidget.sessionContext"
                " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
                timeout=STEP_TIMEOUT_MS,
            )
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

            panel = page.locator(".kserve-triage-panel")
            expect(panel).to_be_visible(timeout=STEP_TIMEOUT_MS)
            # A kubeconfig exists, so the panel opens on the live cluster with its pickers filled from it.
            _scroll_to_top(panel)
            _save(page, "panel-live-cluster.png")
            expect(panel.get_by_label("Namespace", exact=True)).to_have_value("raw")
            expect(panel.get_by_label("Service", exact=True)).to_have_value("vllm-raw")

            panel.get_by_role("button", name="Scenario library").click()
            panel.locator(".widget-dropdown", has_text="Scenario").locator("select").select_option(
                label=scenario_label(load_spec(SCENARIO))
            )
            # The symptom puts its steps first in the panel's step list, with why to read each.
            symptom = next(item for item in SYMPTOMS if item.scenario_symptom == load_spec(SCENARIO).symptom)
            panel.get_by_label("Symptom", exact=True).select_option(label=symptom.label)
            first_row = panel.locator(".widget-hbox", has=page.get_by_role("button", name="Run step")).first
            expect(first_row).to_contain_text(step_heading(symptom.steps[0]))
            expect(first_row).to_contain_text("read first")
            _scroll_to_top(panel)
            _save(page, "panel-before-run.png")

            panel.get_by_role("button", name="Run all").click()
            expect(panel).to_contain_text("done: 9 steps ran", timeout=STEP_TIMEOUT_MS)
            expect(panel).to_contain_text(expected)
            _scroll_to_top(panel)
            _save(page, "panel-after-run.png")

            step_cell = page.locator(".jp-CodeCell", has_text=f'show_step(triage, "{step}")')
            expect(step_cell.locator(".jp-Cell-outputArea")).to_contain_text(expected)
            # Interactive charts drawn by the panel's own vega-embed: no CDN, nothing outside 127.0.0.1.
            expect(step_cell.locator(".vega-embed svg, .vega-embed canvas").first).to_be_visible()
            # The panel's step list links to the step's section: the anchor matches JupyterLab's heading id.
            panel.get_by_role("link", name=step_heading(step)).click()
            expect(page.locator("h2", has_text=step_heading(step))).to_be_in_viewport(timeout=10_000)
            _save(page, "step-after-run.png")
        finally:
            browser.close()
    assert [url for url in requested if not url.startswith((lab.url, "data:", "blob:"))] == []
    assert errors == []
    assert time.monotonic() - began < 120
