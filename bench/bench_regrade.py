"""Re-grading stored passes against running the loop again, replay models at a fixed latency."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_core.batch import Grader, Job, RegradePasses, RunInputs, run_batch
from rubric_core.runs import RunSpec
from rubric_core.store import Store
from rubric_core.workbench.regrade import regrade
from tests.support.store import replay_template

_SCENARIO = "needs_revision_then_satisfied"
"""Two agent turns and two grader verdicts per run: two stored passes per run."""

_RESULTS = Path(__file__).resolve().parent / "results" / "regrade.md"


def _template(store: Store, latency_s: float) -> RunSpec:
    return replay_template(store, _SCENARIO, latency_s=latency_s, rubric="bench")


def _loop(
    store: Store, template: RunSpec, inputs: list[str], concurrency: int
) -> tuple[float, str]:
    started = time.perf_counter()
    summary = run_batch(store, Job(RunInputs(template, tuple(inputs)), concurrency=concurrency))
    elapsed = time.perf_counter() - started
    assert summary.by_status == {"satisfied": len(inputs)}, summary.by_status
    return elapsed, summary.batch_id


def _regrade(store: Store, batch_id: str, grader: str, concurrency: int, passes: int) -> float:
    started = time.perf_counter()
    work = RegradePasses(Grader(grader), batch_id=batch_id, all_passes=True)
    result = regrade(store, Job(work, concurrency=concurrency))
    elapsed = time.perf_counter() - started
    assert (result["items"], result["errors"]) == (passes, 0), result
    return elapsed


def _grader_share(store: Store, batch_id: str) -> float:
    """Seconds spent grading / seconds the runs took, read from the stored passes and runs."""
    conn = store.connect_readonly()
    try:
        graded = conn.execute(
            "SELECT SUM(e.duration_s) FROM evaluations e JOIN runs r ON r.id = e.run_id "
            "WHERE r.batch_id = ?",
            (batch_id,),
        ).fetchone()[0]
        total = conn.execute(
            "SELECT SUM(duration_s) FROM runs WHERE batch_id = ?", (batch_id,)
        ).fetchone()[0]
    finally:
        conn.close()
    return float(graded) / float(total)


def main() -> None:
    """Measure (interleaved) and write the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=1000, help="stored passes to re-grade")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency per model call")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--output", type=Path, default=_RESULTS)
    args = parser.parse_args()

    latency_s = args.latency_ms / 1000
    runs = args.passes // 2
    inputs = [f"Summarise release note number {n} in one paragraph." for n in range(runs)]
    grader = f"replay:{_SCENARIO}?latency_s={latency_s}"
    loops: list[float] = []
    regrades: list[float] = []
    shares: list[float] = []
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        try:
            template = _template(store, latency_s)
            _, warm = _loop(store, template, inputs[:8], args.concurrency)  # imports, graphs
            _regrade(store, warm, grader, args.concurrency, 16)
            for _ in range(args.repeat):  # interleaved: loop, then re-grade its passes
                seconds, batch_id = _loop(store, template, inputs, args.concurrency)
                loops.append(seconds)
                shares.append(_grader_share(store, batch_id))
                regrades.append(_regrade(store, batch_id, grader, args.concurrency, runs * 2))
        finally:
            store.close()
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    loop, again, share = min(loops), min(regrades), statistics.median(shares)
    ratios = [r / loop_s for r, loop_s in zip(regrades, loops, strict=True)]
    lines = [
        "# Re-grading stored passes against running the loop again",
        "",
        f"{runs} inputs of replay scenario `{_SCENARIO}` run through the loop (`run_batch`, "
        f"2 agent calls + 2 grader calls per run, so {runs * 2} stored passes), then all "
        f"{runs * 2} stored passes re-graded (`regrade(all_passes=True)`: 1 grader call each, "
        f"no agent call, no checkpoint). {args.latency_ms:g} ms sleep per model call, "
        f"concurrency {args.concurrency} for both; real SQLite store (and checkpointer for the "
        f"loop) in a temporary directory; {args.repeat} interleaved rounds, best of each. "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}.",
        "",
        "| configuration | wall time (s) | passes/s | vs loop |",
        "|---|---:|---:|---:|",
        f"| loop again (`run_batch`, {runs} runs) | {loop:.2f} | {runs * 2 / loop:.1f} | 1.00x |",
        f"| re-grade ({runs * 2} stored passes) | {again:.2f} | {runs * 2 / again:.1f} | "
        f"{again / loop:.2f}x |",
        "",
        f"Re-grade / loop per round: {', '.join(f'{r:.2f}' for r in ratios)}. The grader's "
        f"share of the loop: {share:.0%} of the runs' time is spent in grading passes "
        "(sum of pass `duration_s` over sum of run `duration_s`, median of rounds); by model "
        "calls it is 50%.",
        "",
        f"Load before: `{load_before}`",
        f"Load after: `{load_after}`",
        "",
        "Reproduce: `python bench/bench_regrade.py` "
        f"(`--passes {args.passes} --latency-ms {args.latency_ms:g} "
        f"--concurrency {args.concurrency} --repeat {args.repeat}`).",
        "",
    ]
    text = "\n".join(lines)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
