"""Fixtures for the browser tests: the dashboard served by `streamlit run`, and headless Chromium."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 60


def chromium_executable() -> str | None:
    """The system Chromium (never a Playwright-downloaded one), or None."""
    for candidate in (
        os.environ.get("RUBRIC_STUDIO_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            msg = f"streamlit exited with {process.returncode} before answering {url}"
            raise RuntimeError(msg)
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    msg = f"streamlit did not answer {url} within {timeout_s:.0f}s"
    raise RuntimeError(msg)


@dataclass
class Dashboard:
    """A running `streamlit run app.py`."""

    url: str
    db_path: Path
    log_path: Path


@pytest.fixture
def dashboard(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Dashboard]:
    """`streamlit run app.py` on a free loopback port, with its database in tmp_path and
    the variables of the test's `dashboard_env` marker, if any, in its environment."""
    db_path = tmp_path / "studio.db"
    log_path = tmp_path / "streamlit.log"
    env = {**os.environ, "RUBRIC_STUDIO_DB": str(db_path), "PYTHONUNBUFFERED": "1"}
    marker = request.node.get_closest_marker("dashboard_env")
    if marker is not None:
        env.update(marker.kwargs)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        env.pop(var, None)
    port = free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.port", str(port), "--server.address", "127.0.0.1",
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process, SERVER_START_TIMEOUT_S)
        yield Dashboard(url=f"http://127.0.0.1:{port}", db_path=db_path, log_path=log_path)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        print(f"\nstreamlit log: {log_path}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """Keep each phase's report on the item, so fixtures can tell a failed test at teardown."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def browser_page(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A Playwright page in the system's headless Chromium; skips when Chromium is absent."""
    executable = chromium_executable()
    if executable is None:
        pytest.skip(
            "no chromium on PATH: install it (apt-get install -y chromium) or set "
            "RUBRIC_STUDIO_CHROMIUM to its path"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            context = browser.new_context(
                viewport={"width": 1440, "height": 2000}, accept_downloads=True
            )
            page = context.new_page()
            page.set_default_timeout(30_000)
            yield page
            report = getattr(request.node, "report_call", None)
            if report is not None and report.failed:
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                path = SCREENSHOTS / f"failed-{request.node.name}.png"
                page.screenshot(path=str(path), full_page=True)
                print(f"screenshot of the failure: {path.relative_to(REPO)}")
            context.close()
        finally:
            browser.close()


@pytest.fixture
def screenshot(browser_page: object) -> object:
    """`screenshot(name)` saves a full-page PNG under artifacts/screenshots/ and prints its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        browser_page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path.relative_to(REPO)}")
        return path

    return take
