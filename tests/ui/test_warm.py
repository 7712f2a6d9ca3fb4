"""The warm-up of pages' first visits: server imports once per process, browser chunks once
per session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def test_warm_up_imports_the_pages_modules_once_per_process():
    code = (
        "import sys\n"
        "from rubric_core.ui import warm\n"
        "assert 'sklearn' not in sys.modules and 'rubric_core.batch' not in sys.modules\n"
        "assert warm.warm_up() is True\n"
        "assert warm.warm_up() is False\n"
        "assert warm.done.wait(300)\n"
        "missing = [m for m in warm.WARM_MODULES if m not in sys.modules]\n"
        "assert not missing, missing\n"
        "assert 'streamlit' not in sys.modules  # the library never imports it\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr


def test_the_frame_asks_the_browser_for_the_chart_chunks_once_per_session(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIC_STUDIO_DB", str(tmp_path / "studio.db"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    scripts = [h.proto.body for h in at.get("html")]
    assert len(scripts) == 1 and "PlotlyChart." in scripts[0] and "import(" in scripts[0]
    at.run()
    assert not at.get("html")  # the chunks are loaded once per browser session
