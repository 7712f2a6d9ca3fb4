"""The page tests' fixtures: a fresh database for the app and the app run once on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.pages import app_env, open_app


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh database path for the app (RUBRIC_STUDIO_DB), no API keys, no base URL."""
    return app_env(tmp_path, monkeypatch)


@pytest.fixture
def app(db_path: Path) -> AppTest:
    """The whole app (frame + Rubrics page), run once."""
    return open_app()
