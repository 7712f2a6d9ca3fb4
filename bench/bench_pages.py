"""Server time of every dashboard page on a store of 100,000 passes (or 1,000,000: `--runs 200000`).

Usage:
    python bench/bench_pages.py                    # 20,000 runs x 5 passes x 10 criteria
    python bench/bench_pages.py --runs 200000      # 1,000,000 passes, 10,000,000 verdicts
    python bench/bench_pages.py --db /tmp/big.db   # reuse a generated store
    python bench/bench_pages.py --runs 2000 --repeat 3   # a quick look
    python bench/bench_pages.py --pages review agreement  # only those pages

Each page is rendered with streamlit.testing.v1.AppTest (the whole script run:
frame, queries, figures, element serialisation; no browser) and the Runs page's
library calls are also timed on their own, among them the pass rates under each
filter the trigger-kept counts cannot serve (they scan the matching verdicts).
"Pass rates shown, a pass arrived" stores a new graded pass before every render, so
no cache keyed by the data can serve it. Every figure is a median of interleaved
repeats, reported with its ratio to the same measurement on a tiny store (20 runs)
taken in the same process, so machine speed cancels out.
Writes a Markdown table to bench/results/pages.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate_store import generate  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from rubric_core.store import NewRun, RunFilters, Store  # noqa: E402
from rubric_core.ui import (  # noqa: E402
    heatmap_figure,
    known_models,
    pass_rate_figure,
    runs_table,
    timeline_figure,
    transcript_items,
)

APP = ROOT / "app.py"
RESULTS = ROOT / "bench" / "results" / "pages.md"
TINY_RUNS = 20
RUNS_PAGES = (
    "Runs page",
    "A run's page (Runs opened on ?run=<id>)",
    "Runs page, pass rates shown",
    "Runs page, pass rates shown, a pass arrived before each render",
)
OTHER_PAGES = ("rubrics", "run", "batch", "compare", "review", "agreement", "experiments", "export")
PAGES = (*RUNS_PAGES, *(f"{name.capitalize()} page" for name in OTHER_PAGES))


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


class PageTimer:
    """An AppTest session on one database, positioned on the Runs page."""

    def __init__(
        self,
        db: Path,
        run_id: int | None,
        *,
        rates: bool = False,
        page: str = "runs",
        before_render: Callable[[], object] | None = None,
    ) -> None:
        self.db = db
        self.before_render = before_render
        os.environ["RUBRIC_STUDIO_DB"] = str(db)
        self.at = AppTest.from_file(str(APP), default_timeout=120)
        self.at.run()  # opens the store (cached) and draws the Rubrics page
        if run_id is not None:
            self.at.query_params["run"] = str(run_id)
        self.at.switch_page(f"app_pages/{page}.py").run()
        if rates:  # the first render with the toggle on computes and caches the pass rates
            self.at.toggle(key="runs_show_rates").set_value(True).run()
        if self.at.exception:
            msg = f"the Runs page raised on {db}: {[e.value for e in self.at.exception]}"
            raise RuntimeError(msg)

    def render(self) -> float:
        os.environ["RUBRIC_STUDIO_DB"] = str(self.db)
        if self.before_render is not None:
            self.before_render()
        start = time.perf_counter()
        self.at.run()
        elapsed = time.perf_counter() - start
        if self.at.exception:
            msg = f"the Runs page raised: {[e.value for e in self.at.exception]}"
            raise RuntimeError(msg)
        return elapsed


def _library_steps(store: Store, run_id: int) -> dict[str, Callable[[], object]]:
    """The queries and figures behind the two pages, each on its own."""

    def detail() -> object:
        run = store.runs.get(run_id)
        evaluations = store.passes.of_run(run_id)
        items = transcript_items(store.runs.transcript(run_id))
        return run, timeline_figure(evaluations), heatmap_figure(evaluations), items

    return {
        "Runs: count_runs()": lambda: store.runs.count(),
        "Runs: list_runs(limit=25) + table": lambda: runs_table(store.runs.find(limit=25)),
        "Runs: model filter choices": lambda: known_models(store),
        "Runs: criterion_pass_rates() + figure": lambda: pass_rate_figure(
            store.passes.criterion_pass_rates()
        ),
        "Run page: run + passes + transcript + figures": detail,
        **{
            f"pass rates, {label} (scan)": (
                lambda f=filters, o=final: store.passes.criterion_pass_rates(f, final_only=o)
            )
            for label, filters, final in _scanned_filters(store, run_id)
        },
    }


def _scanned_filters(store: Store, run_id: int) -> list[tuple[str, RunFilters, bool]]:
    """The filters the pass counts cannot serve, each with the values of a generated run."""
    newest = store.runs.get(run_id)
    month_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).date()
    return [
        ("model filter", RunFilters(model=newest["agent_model"]), False),
        ("status filter", RunFilters(status="satisfied"), False),
        ("date filter (last 30 days)", RunFilters(since=month_ago), False),
        ("batch filter", RunFilters(batch_id=newest["batch_id"]), False),
        ("final pass only", RunFilters(), True),
        ("rubric + final pass only", RunFilters(rubric=newest["rubric"]), True),
    ]


def _pass_arrives(store: Store) -> Callable[[], None]:
    """Store one more graded pass of a run of its own on each call."""
    version = store.runs.find(limit=1)[0]["rubric_version_id"]
    names = store.rubrics.version(version)["criteria"]
    run_id = store.runs.create(
        NewRun(rubric_version_id=version, input="bench", agent_model="replay:bench",
        grader_model="replay:bench", max_iterations=20, agent_kind="basic"),
    )  # fmt: skip
    iteration = iter(range(10**6))

    def arrive() -> None:
        store.passes.record(
            run_id,
            {
                "grading_run_id": "bench", "iteration": next(iteration),
                "result": "needs_revision", "status": "needs_revision", "explanation": "",
                "criteria": [{"name": n, "passed": i % 2 == 0, "gap": "x"} for i, n in enumerate(names)],
                "draft": "", "started_at": time.time(), "duration_s": 0.1,
                "grader_attempts": 1, "grader_input_tokens": 1, "grader_output_tokens": 1,
            },
        )  # fmt: skip

    return arrive


def _middle_run(store: Store) -> int:
    total = store.runs.count()
    return store.runs.find(limit=1, offset=total // 2)[0]["id"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="big store to use (generated if missing)")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--criteria", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--pages",
        nargs="+",
        choices=("runs", *OTHER_PAGES),
        default=("runs", *OTHER_PAGES),
        help="pages to time (default: all; `runs` is the four Runs rows and its library calls)",
    )
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="rubric-bench-pages-"))
    big_db = args.db or work / "big.db"
    tiny_db = work / "tiny.db"
    started = time.perf_counter()
    if not big_db.exists():
        print(f"generating {args.runs * args.passes:,} passes in {big_db} ...", flush=True)
        generate(big_db, runs=args.runs, passes=args.passes, criteria=args.criteria)
    print(f"  ready in {time.perf_counter() - started:.0f}s", flush=True)
    generate(tiny_db, runs=TINY_RUNS, passes=args.passes, criteria=args.criteria)

    stores = {"tiny": Store(tiny_db), "big": Store(big_db)}
    sizes = {}
    for name, store in stores.items():
        conn = store.connect_readonly()
        try:
            passes = conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
            verdicts = conn.execute("SELECT COUNT(*) FROM criterion_results").fetchone()[0]
        finally:
            conn.close()
        sizes[name] = (store.runs.count(), passes, verdicts)
    middles = {name: _middle_run(store) for name, store in stores.items()}

    # Page renders: the Runs page (list, filters, pass rates, newest run's detail), a run's
    # page (the same page opened on a run from the middle of the table by URL), and every
    # other page as it opens.
    dbs = (("tiny", tiny_db), ("big", big_db))
    timers: dict[tuple[str, str], PageTimer] = {}
    for name, db in dbs:
        if "runs" in args.pages:
            timers[(RUNS_PAGES[0], name)] = PageTimer(db, None)
            timers[(RUNS_PAGES[1], name)] = PageTimer(db, middles[name])
            timers[(RUNS_PAGES[2], name)] = PageTimer(db, None, rates=True)
            timers[(RUNS_PAGES[3], name)] = PageTimer(
                db, None, rates=True, before_render=_pass_arrives(stores[name])
            )
        for label, page in zip(PAGES[len(RUNS_PAGES) :], OTHER_PAGES, strict=True):
            if page in args.pages:
                timers[(label, name)] = PageTimer(db, None, page=page)
    page_samples: dict[tuple[str, str], list[float]] = {key: [] for key in timers}
    steps = {
        name: _library_steps(store, middles[name]) if "runs" in args.pages else {}
        for name, store in stores.items()
    }
    step_samples: dict[tuple[str, str], list[float]] = {
        (step, name): [] for name in stores for step in steps[name]
    }
    load_before = _loadavg()
    for _ in range(args.repeat):
        for key, timer in timers.items():  # interleaved: tiny and big alternate
            page_samples[key].append(timer.render())
        for name in stores:
            for step, call in steps[name].items():
                start = time.perf_counter()
                call()
                step_samples[(step, name)].append(time.perf_counter() - start)

    lines = [
        "# Dashboard pages: server time on a large store",
        "",
        f"Command: `python bench/bench_pages.py --runs {args.runs} --passes {args.passes} "
        f"--criteria {args.criteria} --repeat {args.repeat}"
        + ("" if len(args.pages) == len(OTHER_PAGES) + 1 else f" --pages {' '.join(args.pages)}")
        + "`  ",
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs.",
        "",
        f"- big store: {sizes['big'][0]:,} runs, {sizes['big'][1]:,} passes, "
        f"{sizes['big'][2]:,} criterion verdicts",
        f"- baseline: tiny store, {sizes['tiny'][0]:,} runs, {sizes['tiny'][1]:,} passes, "
        f"{sizes['tiny'][2]:,} criterion verdicts (same pages, same process, interleaved)",
        "",
        "Page rows are a whole AppTest script run (frame + page: queries, figures and "
        "element serialisation, no browser). The other rows time the pages' library "
        "calls alone. The Runs page's per-criterion pass rates (off by default) come from "
        "the trigger-kept counts for no filter, a rubric or a version, on every render; "
        "the `(scan)` rows are the filters the counts cannot serve, which count the "
        "matching verdicts (the page caches those until a run or pass is added). Medians "
        f"of {args.repeat} interleaved repeats; load (`/proc/loadavg`) before: {load_before}, "
        f"after: {_loadavg()}.",
        "",
        f"| measurement | tiny store (ms) | {sizes['big'][1]:,}-pass store (ms) | ratio big/tiny |",
        "|---|---:|---:|---:|",
    ]
    for label in dict.fromkeys(label for label, _ in timers):
        tiny = _median_ms(page_samples[(label, "tiny")])
        big = _median_ms(page_samples[(label, "big")])
        lines.append(
            f"| **{label}** (AppTest render) | {tiny:.0f} | {big:.0f} | {big / tiny:.2f} |"
        )
    for step in steps["big"]:
        tiny = _median_ms(step_samples[(step, "tiny")])
        big = _median_ms(step_samples[(step, "big")])
        lines.append(f"| {step} | {tiny:.1f} | {big:.1f} | {big / max(tiny, 1e-6):.1f} |")
    lines.append("")
    text = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"\nwritten to {args.out}")
    for store in stores.values():
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
