"""Benchmark the store's page queries and CSV export on a generated 100,000-pass store."""

from __future__ import annotations

import argparse
import csv
import gc
import io
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate_store import generate

from rubric_core.export import EXPORT_COLUMNS, write_csv
from rubric_core.store import NewRun, Store

RESULTS = Path(__file__).resolve().parent / "results" / "store.md"


class _NullSink(io.TextIOBase):
    """A text stream that counts what it is given and keeps nothing."""

    def __init__(self) -> None:
        self.chars = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


def _median_s(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm the page cache and the statement cache
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def _peak_bytes(fn: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- naive baselines: load everything into Python, then filter there --------------------------


def _naive_rows(path: Path, sql: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def _naive_list_page(path: Path, rubric_id: int, status: str) -> list[dict[str, Any]]:
    runs = _naive_rows(path, "SELECT * FROM runs")
    hits = [r for r in runs if r["rubric_id"] == rubric_id and r["status"] == status]
    hits.sort(key=lambda r: (r["started_at"], r["id"]), reverse=True)
    return hits[:50]


def _naive_run_detail(path: Path, run_id: int) -> tuple:
    runs = {r["id"]: r for r in _naive_rows(path, "SELECT * FROM runs")}
    evaluations = [
        e for e in _naive_rows(path, "SELECT * FROM evaluations") if e["run_id"] == run_id
    ]
    ids = {e["id"] for e in evaluations}
    criteria = [
        c for c in _naive_rows(path, "SELECT * FROM criterion_results") if c["evaluation_id"] in ids
    ]
    messages = [
        m for m in _naive_rows(path, "SELECT * FROM transcript_messages") if m["run_id"] == run_id
    ]
    return runs[run_id], evaluations, criteria, messages


def _naive_pass_rates(path: Path, version_id: int) -> dict[str, tuple[int, int]]:
    runs = {
        r["id"]
        for r in _naive_rows(path, "SELECT * FROM runs")
        if r["rubric_version_id"] == version_id
    }
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in _naive_rows(path, "SELECT * FROM criterion_results"):
        if row["run_id"] in runs:
            counts[row["criterion"]][0] += row["passed"]
            counts[row["criterion"]][1] += 1
    return {k: (v[0], v[1]) for k, v in counts.items()}


def _naive_export(path: Path, sink: io.TextIOBase) -> int:
    rows = _naive_rows(
        path,
        """
        SELECT r.id AS run_id, rb.name AS rubric, rv.version AS rubric_version, r.input,
               r.agent_model, r.grader_model, e.grading_run_id, e.iteration, e.result, e.status,
               cr.criterion, cr.passed, cr.gap, e.explanation, e.grader_input_tokens,
               e.grader_output_tokens, e.duration_s, e.started_at
        FROM runs r JOIN rubric_versions rv ON rv.id = r.rubric_version_id
        JOIN rubrics rb ON rb.id = r.rubric_id JOIN evaluations e ON e.run_id = r.id
        JOIN criterion_results cr ON cr.evaluation_id = e.id
        ORDER BY r.started_at, r.id, e.started_at, e.id, cr.position
        """,
    )
    writer = csv.writer(sink)
    writer.writerow(EXPORT_COLUMNS["criteria"])
    # Columns added since this baseline was written (weights, labels, run status, draft)
    # stay empty: the baseline is about loading everything first, not about those cells.
    writer.writerows([row.get(c) for c in EXPORT_COLUMNS["criteria"]] for row in rows)
    return len(rows)


# --- the benchmark -------------------------------------------------------------------------


def _queries(store: Store) -> dict[str, Callable[[], object]]:
    rubric = store.rubrics.find()[3]
    version_id = rubric["latest_version_id"]
    total = store.runs.count()
    middle = store.runs.find(limit=1, offset=total // 2)[0]["id"]

    def detail() -> object:
        return store.runs.get(middle), store.passes.of_run(middle), store.runs.transcript(middle)

    return {
        "list_runs, page 1 (50 rows, no filter)": lambda: store.runs.find(limit=50),
        "list_runs, page 1 (rubric + status filter)": lambda: store.runs.find(
            rubric=rubric["name"], status="failed", limit=50
        ),
        "list_runs, last page (offset = count - 50)": lambda: store.runs.find(
            limit=50, offset=total - 50
        ),
        "count_runs (rubric + status + since)": lambda: store.runs.count(
            rubric=rubric["name"], status="failed", since="2000-01-01"
        ),
        "count_runs (model, agent or grader)": lambda: store.runs.count(model="openai:gpt-4.1"),
        "run detail (get_run + run_evaluations + transcript)": detail,
        "criterion_pass_rates (one version, every pass)": lambda: store.passes.criterion_pass_rates(
            version_id=version_id
        ),
        "criterion_pass_rates (one version, final pass)": lambda: store.passes.criterion_pass_rates(
            version_id=version_id, final_only=True
        ),
    }


def _naive(store: Store) -> dict[str, Callable[[], object]]:
    rubric = store.rubrics.find()[3]
    total = store.runs.count()
    middle = store.runs.find(limit=1, offset=total // 2)[0]["id"]
    path = store.path
    return {
        "list_runs, page 1 (rubric + status filter)": lambda: _naive_list_page(
            path, rubric["id"], "failed"
        ),
        "run detail (get_run + run_evaluations + transcript)": lambda: _naive_run_detail(
            path, middle
        ),
        "criterion_pass_rates (one version, every pass)": lambda: _naive_pass_rates(
            path, rubric["latest_version_id"]
        ),
    }


def _export(store: Store, **filters: Any) -> tuple[int, float]:
    sink = _NullSink()
    began = time.perf_counter()
    rows = write_csv(store, sink, "criteria", **filters)
    return rows, time.perf_counter() - began


def _writes(tmp: Path, threads: int, per_thread: int, trial: int = 0) -> tuple[float, float]:
    """Committed record_evaluation calls per second from `threads` threads at once,
    and how many of them shared each commit (group commit)."""
    path = tmp / f"writes-{threads}-{trial}.db"
    with Store(path) as store:
        version = store.rubrics.save_version("w", "\n".join(f"- c{i}" for i in range(10)))
        run_ids = [
            store.runs.create(
                NewRun(
                    rubric_version_id=version["id"],
                    input="x",
                    agent_model="a",
                    grader_model="g",
                    grader_tools=[],
                    max_iterations=per_thread,
                    agent_kind="basic",
                ),
            )
            for _ in range(threads)
        ]
        verdicts = [{"name": f"c{i}", "passed": i % 3 != 0, "gap": "g"} for i in range(10)]

        def work(run_id: int) -> None:
            for i in range(per_thread):
                store.passes.record(
                    run_id,
                    {
                        "grading_run_id": "g",
                        "iteration": i,
                        "result": "needs_revision",
                        "status": "needs_revision",
                        "explanation": "e",
                        "criteria": verdicts,
                        "draft": "d" * 500,
                        "started_at": time.time(),
                        "duration_s": 1.0,
                        "grader_attempts": 1,
                        "grader_input_tokens": 1,
                        "grader_output_tokens": 1,
                    },
                )

        batches: list[int] = []
        writer = store._backend.connections
        run_batch = writer._run_batch

        def counting(db: Any, jobs: list) -> None:
            batches.append(len(jobs))
            run_batch(db, jobs)

        writer._run_batch = counting  # type: ignore[method-assign]
        workers = [threading.Thread(target=work, args=(r,)) for r in run_ids]
        began = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        rate = threads * per_thread / (time.perf_counter() - began)
        return rate, threads * per_thread / len(batches)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def run(*, runs: int, passes: int, criteria: int, factor: int, repeats: int, data_dir: Path) -> str:
    """Generate both stores, measure, and return the Markdown report."""
    data_dir.mkdir(parents=True, exist_ok=True)
    small_runs = max(runs // factor, 100)
    began = time.perf_counter()
    big_path = generate(data_dir / "big.db", runs=runs, passes=passes, criteria=criteria)
    gen_big = time.perf_counter() - began
    small_path = generate(data_dir / "small.db", runs=small_runs, passes=passes, criteria=criteria)
    big, small = Store(big_path), Store(small_path)
    lines: list[str] = []
    try:
        evaluations, rows = runs * passes, runs * passes * criteria
        lines += [
            "## Store queries and CSV export",
            "",
            f"Generated store: {runs:,} runs × {passes} passes × {criteria} criteria = "
            f"{evaluations:,} evaluations, {rows:,} criterion rows "
            f"({big_path.stat().st_size / 1e6:.0f} MB, generated in {gen_big:.1f}s by "
            "`bench/generate_store.py`). Baselines measured in the same run: the same query on a "
            f"{factor}× smaller store ({small_runs:,} runs), and a naive version that loads the "
            "tables into Python and filters there. Median of "
            f"{repeats} repeats after one warm-up; Python {platform.python_version()}, "
            f"SQLite {sqlite3.sqlite_version}, {platform.machine()}, {os.cpu_count()} CPUs shared "
            "with other work, so absolute times are noisy; compare the ratios, measured in the "
            "same run.",
            "",
            f"| Query | {small_runs:,} runs (ms) | {runs:,} runs (ms) | time ratio at {factor}× data "
            "| naive load-all (ms) | speed-up vs naive |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        naive = _naive(big)
        small_queries = _queries(small)
        for label, query in _queries(big).items():
            t_big = _median_s(query, repeats)
            t_small = _median_s(small_queries[label], repeats)
            if label in naive:
                t_naive = _median_s(naive[label], max(1, repeats // 3))
                naive_cells = f"{_ms(t_naive)} | {t_naive / t_big:,.0f}×"
            else:
                naive_cells = "– | –"
            lines.append(
                f"| {label} | {_ms(t_small)} | {_ms(t_big)} | {t_big / t_small:.2f} | {naive_cells} |"
            )
            print(lines[-1], flush=True)

        version_id = big.rubrics.find()[3]["latest_version_id"]
        export_cases = [
            ("CSV export, one rubric version", big, {"version_id": version_id}),
            (f"CSV export, everything ({small_runs:,} runs)", small, {}),
            (f"CSV export, everything ({runs:,} runs)", big, {}),
        ]
        lines += [
            "",
            "| Export (criteria dataset, to a null sink) | rows | seconds | rows/s | peak Python memory |",
            "|---|---:|---:|---:|---:|",
        ]
        peaks: dict[str, int] = {}
        for label, store, filters in export_cases:
            timings = [_export(store, **filters) for _ in range(max(1, repeats // 3))]
            count = timings[0][0]
            seconds = statistics.median(t for _, t in timings)
            peak = _peak_bytes(
                lambda s=store, f=filters: write_csv(s, _NullSink(), "criteria", **f)
            )
            peaks[label] = peak
            lines.append(
                f"| {label} | {count:,} | {seconds:.2f} | {count / seconds:,.0f} | {_mb(peak)} |"
            )
            print(lines[-1], flush=True)
        naive_began = time.perf_counter()
        naive_rows = _naive_export(small_path, _NullSink())
        naive_seconds = time.perf_counter() - naive_began
        naive_peak = _peak_bytes(lambda: _naive_export(small_path, _NullSink()))
        lines.append(
            f"| naive: fetchall then write ({small_runs:,} runs) | {naive_rows:,} | "
            f"{naive_seconds:.2f} | {naive_rows / naive_seconds:,.0f} | {_mb(naive_peak)} |"
        )
        streaming_small = peaks[f"CSV export, everything ({small_runs:,} runs)"]
        streaming_big = peaks[f"CSV export, everything ({runs:,} runs)"]
        lines += [
            "",
            f"Streaming export memory at {factor}× the rows: {streaming_big / streaming_small:.2f}× "
            f"({_mb(streaming_small)} → {_mb(streaming_big)}); the naive export of the smaller "
            f"store alone peaks at {naive_peak / streaming_small:,.0f}× the streaming export's memory.",
        ]

        with tempfile.TemporaryDirectory() as tmp:
            # Interleaved trials, compared pairwise: fsync speed on a shared disk drifts.
            trials = [{n: _writes(Path(tmp), n, 600 // n, t) for n in (1, 4, 8)} for t in range(5)]
        lines += [
            "",
            "| Writes: record_evaluation (10 criteria), each committed with synchronous=FULL "
            "| passes/s (median of 5) | vs 1 thread (median of paired ratios) | passes per commit |",
            "|---|---:|---:|---:|",
        ]
        for n in (1, 4, 8):
            rate = statistics.median(t[n][0] for t in trials)
            ratio = statistics.median(t[n][0] / t[1][0] for t in trials)
            shared = statistics.median(t[n][1] for t in trials)
            label = "1 thread" if n == 1 else f"{n} threads at once (one writer, group commit)"
            lines.append(f"| {label} | {rate:,.0f} | {ratio:.2f}× | {shared:.2f} |")
        lines += [
            "",
            "Writes are bound by the fsync of each commit; with several callers at once the "
            "writer thread commits whatever queued up together (each job in its own savepoint, "
            "each caller answered only after COMMIT), so commits per pass fall as callers rise. "
            "On a shared disk the fsync latency itself drifts between trials.",
        ]
        lines.append("")
        print("\n".join(lines[-6:]), flush=True)
    finally:
        big.close()
        small.close()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: `python bench/bench_store.py [--runs 20000] [--repeats 7]`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--criteria", type=int, default=10)
    parser.add_argument(
        "--factor", type=int, default=10, help="how much smaller the baseline store is"
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=None, help="where to generate the stores")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rubric-bench-") as tmp:
        report = run(
            runs=args.runs,
            passes=args.passes,
            criteria=args.criteria,
            factor=args.factor,
            repeats=args.repeats,
            data_dir=args.data_dir or Path(tmp),
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n", encoding="utf-8")
    print(f"\n{report}\n\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
