"""Batch throughput against sequential runs, with replay models given a fixed latency per call."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_core.models import load_scenario
from rubric_core.runs import RunSpec, run_batch, run_once
from rubric_core.store import Store

_SCENARIO = "needs_revision_then_satisfied"
"""Two agent turns and two grader verdicts per run: four model calls, two grading passes."""

_RESULTS = Path(__file__).resolve().parent / "results" / "batch.md"


def _template(store: Store, latency_s: float) -> RunSpec:
    scenario = load_scenario(_SCENARIO)
    version_id = store.save_rubric_version("bench", scenario["rubric"])["id"]
    model = f"replay:{_SCENARIO}?latency_s={latency_s}"
    return RunSpec(
        rubric_version_id=version_id,
        input=scenario["input"],
        agent_model=model,
        grader_model=model,
        max_iterations=scenario["max_iterations"],
    )


def _sequential(store: Store, template: RunSpec, inputs: list[str]) -> float:
    started = time.perf_counter()
    for text in inputs:
        run = run_once(store, template.with_input(text))
        assert run["status"] == "satisfied", run
    return time.perf_counter() - started


def _batch(store: Store, template: RunSpec, inputs: list[str], concurrency: int) -> float:
    started = time.perf_counter()
    summary = run_batch(store, template, inputs, concurrency=concurrency)
    elapsed = time.perf_counter() - started
    assert summary.by_status == {"satisfied": len(inputs)}, summary.by_status
    return elapsed


def main() -> None:
    """Measure and write the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=32, help="inputs per measurement")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency per model call")
    parser.add_argument("--repeat", type=int, default=3, help="best of N per configuration")
    parser.add_argument("--output", type=Path, default=_RESULTS)
    args = parser.parse_args()

    latency_s = args.latency_ms / 1000
    inputs = [f"Summarise release note number {n} in one paragraph." for n in range(args.runs)]
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        try:
            template = _template(store, latency_s)
            run_once(store, template)  # warm-up: imports, graph compilation, checkpoint tables
            sequential = min(_sequential(store, template, inputs) for _ in range(args.repeat))
            rows.append(("sequential `run_once`", sequential))
            for concurrency in (1, 4, 8):
                best = min(_batch(store, template, inputs, concurrency) for _ in range(args.repeat))
                rows.append((f"`run_batch` concurrency {concurrency}", best))
        finally:
            store.close()

    baseline = rows[0][1]
    calls = 4 * args.runs
    floor = calls * latency_s
    lines = [
        "# Batch throughput",
        "",
        f"{args.runs} runs of replay scenario `{_SCENARIO}` (2 agent calls + 2 grader calls per "
        f"run, {args.latency_ms:g} ms sleep per model call, so {floor:.2f} s of pure model "
        f"latency per {args.runs} runs when sequential). Real SQLite store and SQLite "
        f"checkpointer in a temporary directory; best of {args.repeat}. "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}.",
        "",
        "| configuration | wall time (s) | runs/s | speed-up vs sequential |",
        "|---|---:|---:|---:|",
    ]
    for label, seconds in rows:
        lines.append(
            f"| {label} | {seconds:.2f} | {args.runs / seconds:.1f} | {baseline / seconds:.2f}x |"
        )
    lines += [
        "",
        f"Sequential overhead beyond model latency: "
        f"{(baseline - floor) / args.runs * 1000:.0f} ms per run (agent graph, grader sub-agent, "
        "store writes, checkpoints).",
        "",
        "Reproduce: `python bench/bench_batch.py` "
        f"(`--runs {args.runs} --latency-ms {args.latency_ms:g} --repeat {args.repeat}`).",
        "",
    ]
    text = "\n".join(lines)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
