"""Dashboard time to interactive in Chromium, each page beside an empty page, on a big store.

    python bench/bench_tti.py [--db STORE] [--runs 20000] [--rounds 5] [--pages runs batch]

A store of `--runs` runs x 5 passes (100,000 passes by default; generated with
bench/generate_store.py when `--db` does not exist) is served by `streamlit run` of the real
app.py, started through a wrapper in a temporary folder that adds one page: "Empty", a page
that only draws its title, the floor of a page switch (the websocket round trip, the frame's
sidebar, Streamlit's own redraw). The system's headless Chromium then switches between the
pages the way a person does, by clicking the sidebar's links, in interleaved rounds (each
round visits every page, the empty page before each one), and times, per switch:

- first render: from the click until the page's title is drawn;
- interactive: until the script run is over (the server says so) and the browser has drawn
  it (no stale element left, every plotly chart's SVG drawn);
- server: the script run's own time in the server process (the wrapper times `page.run()`).

Round 0 is each page's first visit in a fresh server process and browser session
(modules imported, caches empty), after `--think-ms` on the page before it, as a person
reads a page before going on; the table reports it apart from the median of the later
rounds (which switch without pausing). Writes a Markdown
table to bench/results/tti.md (or `--out`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from generate_store import generate  # noqa: E402

from tests.e2e.conftest import CHROMIUM_ARGS, _wait_healthy, chromium_executable  # noqa: E402
from tests.support.net import free_port as _free_port  # noqa: E402

PAGES = (
    "rubrics",
    "run",
    "batch",
    "runs",
    "compare",
    "review",
    "agreement",
    "experiments",
    "export",
)
RESULTS = REPO / "bench" / "results" / "tti.md"

WRAPPER = '''
"""Bench wrapper (bench/bench_tti.py): app.py with an empty page, each page run timed."""
import json, runpy, time
from pathlib import Path

import streamlit as st

TIMES = Path(__file__).with_name("server_times.jsonl")
# The wrapper runs again on every rerun, in the same process: patch the original only once.
if not hasattr(st, "_bench_navigation"):
    st._bench_navigation = st.navigation
_navigation = st._bench_navigation


def _empty():
    st.title("Empty")


def _timed(pages, **kwargs):
    chosen = _navigation([*pages, st.Page(_empty, title="Empty", url_path="empty")], **kwargs)
    run = chosen.run

    def timed_run():
        started = time.perf_counter()
        try:
            run()
        finally:
            with TIMES.open("a") as fp:
                fp.write(json.dumps({"page": chosen.url_path or "rubrics",
                                     "ms": (time.perf_counter() - started) * 1000}) + "\\n")

    chosen.run = timed_run
    return chosen


st.navigation = _timed
runpy.run_path(REPO_APP, run_name="__main__")
'''

DONE = """() => {
    if (document.querySelector('[data-stale="true"]')) return false;
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;
    const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
    for (const chart of charts) { if (!chart.querySelector('svg.main-svg')) return false; }
    return true;
}"""


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _wrapper_folder(folder: Path, repo: Path = REPO) -> Path:
    """The wrapper app beside links to the real pages and widgets (st.Page paths resolve
    against the main script's folder)."""
    for name in ("app_pages", "app_widgets"):
        (folder / name).symlink_to(repo / name, target_is_directory=True)
    script = folder / "bench_app.py"
    script.write_text(f"REPO_APP = {str(repo / 'app.py')!r}\n" + WRAPPER, encoding="utf-8")
    return script


class ServerRuns:
    """The script runs the wrapper has finished, read from its log (the app shows no
    running indicator with `toolbarMode = "minimal"`, so the browser cannot tell)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def count(self) -> int:
        try:
            return len(self.path.read_text().splitlines())
        except FileNotFoundError:
            return 0

    def wait_past(self, count: int, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while self.count() <= count:
            if time.monotonic() > deadline:
                msg = f"the page's script run did not end within {timeout_s:.0f} s"
                raise TimeoutError(msg)
            time.sleep(0.01)


RUNS: ServerRuns | None = None


def _interactive(page, before: int) -> None:
    """Wait until the page's script run has ended on the server and the browser has drawn
    it (no stale element, every plotly chart's SVG)."""
    assert RUNS is not None
    RUNS.wait_past(before)
    page.wait_for_function(DONE, timeout=180_000)


def _switch(page, name: str, title: str) -> tuple[float, float]:
    """Click the sidebar link of `name`; (ms to the title drawn, ms to interactive)."""
    link = page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').first
    if name == "rubrics":
        link = page.locator('[data-testid="stSidebarNav"] a').first
    before = RUNS.count() if RUNS else 0
    started = time.perf_counter()
    link.click()
    page.wait_for_function(
        """(title) => { const h = document.querySelector('[data-testid="stMain"] h1');
                        return h && h.textContent.trim().startsWith(title)
                               && !h.closest('[data-stale="true"]'); }""",
        arg=title,
        timeout=120_000,
    )
    first = (time.perf_counter() - started) * 1000
    _interactive(page, before)
    return first, (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="a store (generated if missing)")
    parser.add_argument("--runs", type=int, default=20_000, help="runs of a generated store")
    parser.add_argument("--rounds", type=int, default=5, help="rounds after the first visit")
    parser.add_argument("--pages", nargs="*", default=list(PAGES))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--repo", type=Path, default=REPO, help="the checkout whose app.py is served"
    )
    parser.add_argument(
        "--think-ms",
        type=int,
        default=2000,
        help="pause on a page before a first visit to the next (a person reading it)",
    )
    args = parser.parse_args()
    executable = chromium_executable()
    if executable is None:
        print("no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="rubric-tti-") as tmp:
        folder = Path(tmp)
        db = args.db or folder / "studio.db"
        if not db.exists():
            started = time.perf_counter()
            generate(db, runs=args.runs)
            print(f"generated {db} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        repo = args.repo.resolve()
        script = _wrapper_folder(folder, repo)
        global RUNS
        RUNS = ServerRuns(folder / "server_times.jsonl")
        port = _free_port()
        env = {**os.environ, "RUBRIC_STUDIO_DB": str(db), "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join([str(repo), env.get("PYTHONPATH", "")])
        load_before = _load()
        log = (folder / "streamlit.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        results: dict[str, dict[str, list[float]]] = {}
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_healthy(f"{base}/_stcore/health", process, 120)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=executable, headless=True, args=CHROMIUM_ARGS
                )
                context = browser.new_context(viewport={"width": 1440, "height": 1000})
                page = context.new_page()
                page.goto(f"{base}/empty")
                RUNS.wait_past(0)
                page.wait_for_function(DONE, timeout=180_000)
                titles = {"empty": "Empty"}
                for name in args.pages:  # each page's title, read off its first visit
                    titles[name] = ""
                for round_no in range(args.rounds + 1):
                    for name in args.pages:
                        for target in ("empty", name):
                            if not titles[target]:
                                page.wait_for_timeout(args.think_ms)
                                first, done = _first_visit(page, target)
                                titles[target] = (
                                    page.locator('[data-testid="stMain"] h1')
                                    .first.text_content()
                                    .strip()[:12]
                                )
                            else:
                                first, done = _switch(page, target, titles[target])
                            key = "first" if round_no == 0 else "later"
                            slot = results.setdefault(target, {})
                            slot.setdefault(f"{key}_render", []).append(first)
                            slot.setdefault(f"{key}_done", []).append(done)
                    print(f"round {round_no} done (load {_load()})", file=sys.stderr)
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
            log.close()
        server: dict[str, list[float]] = {}
        times = folder / "server_times.jsonl"
        if times.exists():
            for line in times.read_text().splitlines():
                item = json.loads(line)
                server.setdefault(item["page"], []).append(item["ms"])
        load_after = _load()
    _report(args, results, server, load_before, load_after)
    return 0


def _first_visit(page, name: str) -> tuple[float, float]:
    """The first visit of a page: click its link, wait for any title and the run's end."""
    link = page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').first
    if name == "rubrics":
        link = page.locator('[data-testid="stSidebarNav"] a').first
    before = page.url
    runs_before = RUNS.count() if RUNS else 0
    started = time.perf_counter()
    link.click()
    page.wait_for_function(
        """(before) => location.href !== before
             && document.querySelector('[data-testid="stMain"] h1:not([data-stale="true"] h1)')""",
        arg=before,
        timeout=180_000,
    )
    first = (time.perf_counter() - started) * 1000
    _interactive(page, runs_before)
    return first, (time.perf_counter() - started) * 1000


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _report(args, results, server, load_before: str, load_after: str) -> None:
    empty = results["empty"]
    base_render = _median(empty.get("later_render", []))
    base_done = _median(empty.get("later_done", []))
    base_server = _median(server.get("empty", [])[1:])
    lines = [
        f"# Dashboard time to interactive ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"`python bench/bench_tti.py {' '.join(sys.argv[1:])}` on {platform.node()} "
        f"({os.cpu_count()} CPUs), load {load_before} before, {load_after} after. Medians of "
        f"{args.rounds} rounds after the first visit; the empty page measured before each page.",
        "",
        "| page | first visit: render / interactive / server (ms) | render (ms) "
        "| interactive (ms) | server (ms) | interactive / empty page's |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ["empty", *args.pages]:
        slot = results.get(name, {})
        first_r = _median(slot.get("first_render", []))
        first_d = _median(slot.get("first_done", []))
        render = _median(slot.get("later_render", []))
        done = _median(slot.get("later_done", []))
        runs = server.get(name, [])
        ms = _median(runs[1:])
        first_s = runs[0] if runs else float("nan")
        ratio = done / base_done if base_done else float("nan")
        lines.append(
            f"| {name} | {first_r:.0f} / {first_d:.0f} / {first_s:.0f} | {render:.0f} | {done:.0f} "
            f"| {ms:.0f} "
            f"| {ratio:.2f} |"
        )
    lines += [
        "",
        f"Empty page: render {base_render:.0f} ms, interactive {base_done:.0f} ms, "
        f"server {base_server:.0f} ms.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
