"""Screenshots of every dashboard page at 1440 and 1024 px, on a store seeded offline.

    python bench/screenshots.py [--out artifacts/screenshots/pages] [--db PATH] [--port N]

The store is filled through the CLI with the bundled replay scenarios (scripted turns,
not language models), then `streamlit run app.py` is started on a free loopback port and
the system's headless Chromium visits each page listed in app.py. Not a test: the pictures
are for a person to open and judge before a change lands.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.conftest import CHROMIUM_ARGS, _wait_healthy, chromium_executable  # noqa: E402
from tests.support.net import free_port as _free_port  # noqa: E402

SCENARIOS = (
    "haiku", "needs_revision_then_satisfied", "report_sections", "max_iterations", "grader_error"
)  # fmt: skip
BATCH_SCENARIO = "needs_revision_then_satisfied"
BATCH_INPUTS = ("Release note for v1.0", "Release note for v1.1", "Release note for v2.0")
WIDTHS = (1440, 1024)


def page_paths() -> list[str]:
    """URL paths of the pages app.py registers, in navigation order."""
    text = (REPO / "app.py").read_text(encoding="utf-8")
    return [Path(name).stem for name in re.findall(r'st\.Page\(\s*"app_pages/([\w]+\.py)"', text)]


def settle(page: object) -> None:
    """Wait (bounded) until the script run is over and no skeleton placeholder is left."""
    done = """() => !document.querySelector('[data-testid="stSkeleton"]')
                 && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stSpinner"]')"""
    try:
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=60_000)
        page.wait_for_timeout(1000)
        page.wait_for_function(done, timeout=60_000)
    except Exception:  # a page that never settles is still worth a look
        print("  (page still drawing after 60 s)", file=sys.stderr)
    page.wait_for_timeout(1500)  # plotly draws after the script run ends


def seed(db: Path) -> None:
    """A few finished replay runs (one a grader error) and a small batch, so every page
    has something to show."""
    for scenario in SCENARIOS:
        subprocess.run(
            [sys.executable, "-m", "rubric_core", "run", "--scenario", scenario, "--quiet",
             "--db", str(db)],
            cwd=REPO, check=False, timeout=300,
        )  # fmt: skip
    inputs = db.with_name("batch-inputs.jsonl")
    inputs.write_text("".join(json.dumps({"input": text}) + "\n" for text in BATCH_INPUTS))
    subprocess.run(
        [sys.executable, "-m", "rubric_core", "batch", "--scenario", BATCH_SCENARIO,
         "--input-file", str(inputs), "--db", str(db)],
        cwd=REPO, check=False, timeout=300, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "artifacts" / "screenshots" / "pages")
    parser.add_argument("--db", type=Path, default=None, help="an existing store to show")
    parser.add_argument(
        "--port", type=int, default=None, help="the server's port (else a free one)"
    )
    args = parser.parse_args()
    args.out = args.out.resolve()
    executable = chromium_executable()
    if executable is None:
        print("no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rubric-shots-") as folder:
        db = args.db or Path(folder) / "studio.db"
        if args.db is None:
            seed(db)
        port = args.port or _free_port()
        env = {"RUBRIC_STUDIO_DB": str(db), "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            cwd=REPO, env={**__import__("os").environ, **env},
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_healthy(f"{base}/_stcore/health", process, 60)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=executable, headless=True, args=CHROMIUM_ARGS
                )
                for width in WIDTHS:
                    context = browser.new_context(viewport={"width": width, "height": 2400})
                    page = context.new_page()
                    for index, name in enumerate(page_paths()):
                        # The default (first) page lives at "/": its own path is "not found".
                        page.goto(f"{base}/{name if index else ''}")
                        page.wait_for_selector('[data-testid="stMain"]', timeout=30_000)
                        settle(page)
                        path = args.out / f"{name}-{width}.png"
                        page.screenshot(path=str(path), full_page=True)
                        print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
                    context.close()
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
