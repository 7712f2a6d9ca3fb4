"""Steps of the browser journeys (`tests/e2e/`) on a Playwright page of the dashboard."""

from __future__ import annotations

import time
from typing import Any


def wait_idle(page: Any, timeout_s: float = 30) -> None:
    """Wait until Streamlit has finished redrawing: no run in progress, no stale element left."""
    page.wait_for_timeout(300)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stStatusWidget"]').is_visible()
        if not running and page.locator('[data-stale="true"]').count() == 0:
            return
        page.wait_for_timeout(200)


def assert_no_exception(page: Any) -> None:
    """No traceback box anywhere on the page."""
    assert page.locator('[data-testid="stException"]').count() == 0


def go_to(page: Any, title: str) -> None:
    """Click a page in the sidebar navigation and wait for its title."""
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    page.get_by_role("heading", name=title, exact=True).wait_for()
    wait_idle(page)


def widget(page: Any, testid: str, label: str, nth: int = 0) -> Any:
    """The nth Streamlit widget of a kind whose label contains `label`."""
    return page.locator(f'[data-testid="{testid}"]').filter(has_text=label).nth(nth)


def choose(page: Any, label: str, option: str, nth: int = 0) -> None:
    """Pick `option` in the selectbox labelled `label`."""
    page.get_by_role("combobox", name=label).nth(nth).click()
    page.get_by_role("option", name=option).first.click()
    wait_idle(page)


def pick_option(page: Any, group: Any, option: str, *, shows: Any, timeout_s: float = 90) -> None:
    """Click `option` in the radio `group` and wait until `shows` (what the choice draws) is
    on the page. A click that lands while the page redraws from the change before may be
    dropped by the browser; the radio is then shown unchecked, and, as a person would, the
    click is made again. A radio shown checked whose choice is never drawn fails here."""
    deadline = time.monotonic() + timeout_s
    choice = group.locator('[data-testid="stRadioOption"]').filter(has_text=option)
    while True:
        if not choice.locator("input").is_checked():
            choice.click()
        wait_idle(page)
        try:
            shows.wait_for(timeout=5_000)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise


def type_into(locator: Any, text: str) -> None:
    """Fill a text input/area and commit it the way a person does (focus leaves the field)."""
    locator.fill(text)
    locator.press("Tab")


def metric_value(page: Any, label: str) -> str:
    box = widget(page, "stMetric", label)
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()
