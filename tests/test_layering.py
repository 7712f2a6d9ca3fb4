"""The library never imports Streamlit: pages call into rubric_core, never the reverse."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import rubric_core

ROOT = Path(__file__).resolve().parents[1]


def test_no_rubric_core_module_imports_streamlit():
    modules = sorted(
        info.name
        for info in pkgutil.walk_packages(rubric_core.__path__, prefix="rubric_core.")
        if not info.name.endswith("__main__")
    )
    assert "rubric_core.middleware" in modules and "rubric_core.charts" in modules
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'streamlit'))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "[]"
