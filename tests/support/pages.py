"""The dashboard under `streamlit.testing.v1.AppTest`: where the app is, the environment it
runs in, and the steps every page test takes. The fixtures `db_path` and `app` that use them
are in `tests/app/conftest.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.env import clear_provider_env

APP = Path(__file__).resolve().parents[2] / "app.py"
SCENARIO = "needs_revision_then_satisfied"
"""The replay scenario the page tests launch unless they name another."""
RUN_TIMEOUT_S = 60


def app_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh database path for the app (RUBRIC_STUDIO_DB), no API keys, no base URL."""
    path = tmp_path / "studio.db"
    monkeypatch.setenv("RUBRIC_STUDIO_DB", str(path))
    clear_provider_env(monkeypatch)
    return path


def open_app() -> AppTest:
    """The whole app (frame + Rubrics page), run once."""
    return AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()


def open_page(at: AppTest, page: str, **params: str) -> AppTest:
    """`at` switched to `app_pages/<page>.py` with these query parameters, and run."""
    for name, value in params.items():
        at.query_params[name] = value
    return at.switch_page(f"app_pages/{page}.py").run()


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]
