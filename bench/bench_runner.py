"""CPU a run costs beyond its model calls: `run_once` with zero-latency replay models.

Each run is replay scenario `needs_revision_then_satisfied` (2 agent calls, 2 grader
calls, two grading passes) on a real SQLite store and SQLite checkpointer in a temporary
directory, so everything but model latency is measured: building the agent, the graph,
the grader, checkpoints and store writes. CPU time (`time.process_time`) per run is the
figure; wall time is shown beside it (it adds the fsyncs).

With `--baseline-tree DIR` (a checkout of another commit, e.g. `git archive <rev> | tar -x
-C DIR`) the same measurement runs in that tree too, in subprocesses alternating round by
round with this tree, so load drifts hit both alike; the ratio is the figure to trust.

With `--floor`, the LangGraph floor (`bench/floor.py`: the run's graph steps,
checkpointer and replay models with nothing of ours: no store, no grading logic) is
measured the same way, alternating with the trees: a run's CPU minus the floor's is what
our code costs, and the floor is what no loop built on these steps can go below.

Usage:
    python bench/bench_runner.py [--runs 40] [--rounds 5] [--baseline-tree DIR] [--floor]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

_HERE = Path(__file__).resolve().parents[1]
_SCENARIO = "needs_revision_then_satisfied"


def measure(runs: int, durability: str | None = None) -> dict[str, float]:
    """Run `runs` runs in this process (after one warm-up); CPU and wall ms per run.

    `durability` overrides the runner's checkpoint durability mode (`RUN_DURABILITY`)."""
    if durability is not None:
        import rubric_core.runs.execute

        rubric_core.runs.execute.RUN_DURABILITY = durability  # type: ignore[assignment]
    try:
        from rubric_core.providers import load_scenario
    except ModuleNotFoundError:  # a baseline tree from before providers/ (rubric_core.models)
        from rubric_core.models import load_scenario  # type: ignore[no-redef]
    from rubric_core.runs import RunSpec, run_once
    from rubric_core.store import Store

    scenario = load_scenario(_SCENARIO)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        try:
            version = store.rubrics.save_version("bench", scenario["rubric"])["id"]
            spec = RunSpec(
                rubric_version_id=version,
                input=scenario["input"],
                agent_model=f"replay:{_SCENARIO}",
                grader_model=f"replay:{_SCENARIO}",
                max_iterations=scenario["max_iterations"],
            )
            assert run_once(store, spec)["status"] == "satisfied"  # warm-up

            def one(n: int) -> None:
                assert run_once(store, spec.with_input(f"input {n}"))["status"] == "satisfied"

            return _per_run(one, runs, f"{store.path}.checkpoints.sqlite")
        finally:
            store.close()


def _per_run(run: Callable[[int], None], runs: int, checkpoints: str) -> dict[str, float]:
    """CPU and wall ms per call of `run(0)`, `run(1)`, ..., and checkpoint rows per call."""

    def rows() -> int:
        with contextlib.closing(sqlite3.connect(checkpoints)) as conn:
            return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])

    before = rows()
    cpu, wall = time.process_time(), time.perf_counter()
    for n in range(runs):
        run(n)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "cpu_ms": cpu / runs * 1e3,
        "wall_ms": wall / runs * 1e3,
        "checkpoints": (rows() - before) / runs,
    }


def measure_floor(runs: int) -> dict[str, float]:
    """The LangGraph floor's CPU and wall ms per run, measured as `measure` measures a run."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from floor import build_floor

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "floor.checkpoints.sqlite")
        run = build_floor(path)
        run(-1)  # warm-up
        return _per_run(run, runs, path)


_FLOOR = "__floor__"
"""The durability argument that makes a child measure the floor instead of a run."""


def _child(tree: Path, runs: int, durability: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    extra = ["--durability", durability] if durability else []
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--runs", str(runs), *extra],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument(
        "--durabilities",
        nargs="+",
        default=None,
        help="also run this tree with each of these checkpoint durability modes",
    )
    parser.add_argument(
        "--floor", action="store_true", help="also measure the LangGraph floor (bench/floor.py)"
    )
    parser.add_argument("--durability", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(_HERE / "bench" / "results" / "runner.md"))
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, os.getcwd())
        if args.durability == _FLOOR:
            print(json.dumps(measure_floor(args.runs)))
        else:
            print(json.dumps(measure(args.runs, args.durability)))
        return

    trees: dict[str, tuple[Path, str | None]] = {"this tree": (_HERE, None)}
    if args.baseline_tree is not None:
        trees["baseline tree"] = (args.baseline_tree.resolve(), None)
    for mode in args.durabilities or ():
        trees[f"this tree, durability={mode!r}"] = (_HERE, mode)
    if args.floor:
        trees["LangGraph floor"] = (_HERE, _FLOOR)
    load_before = Path("/proc/loadavg").read_text().strip()
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(list(trees)))
        for name in order:
            tree, mode = trees[name]
            rounds[name].append(_child(tree, args.runs, mode))
    load_after = Path("/proc/loadavg").read_text().strip()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[name])

    def paired(a: str, b: str, figure: Callable[[float, float], float]) -> list[float]:
        """`figure(a's CPU, b's CPU)` for each round, both measured in it."""
        return [figure(x["cpu_ms"], y["cpu_ms"]) for x, y in zip(rounds[a], rounds[b], strict=True)]

    lines = [
        "| tree | CPU per run (ms, median of rounds) | wall per run (ms) | checkpoints per run |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {med(name, 'cpu_ms'):.1f} | {med(name, 'wall_ms'):.1f} | "
            f"{med(name, 'checkpoints'):.1f} |"
            for name in trees
        ),
    ]
    if "baseline tree" in trees:
        ratios = paired("this tree", "baseline tree", lambda ours, base: ours / base)
        lines += [
            "",
            f"CPU this/baseline, median of {args.rounds} paired rounds: "
            f"**{statistics.median(ratios):.2f}** (rounds: "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + ")",
        ]
    if args.floor:
        over_floor = paired("this tree", "LangGraph floor", lambda ours, floor: ours / floor)
        lines += [
            "",
            f"CPU this tree/floor, median of {args.rounds} paired rounds: "
            f"**{statistics.median(over_floor):.2f}x** (rounds: "
            + ", ".join(f"{x:.2f}" for x in over_floor)
            + ")",
        ]
        if "baseline tree" in trees:
            base_floor = paired("baseline tree", "LangGraph floor", lambda b, floor: b / floor)
            lines.append(
                f"\nCPU baseline tree/floor, same rounds: {statistics.median(base_floor):.2f}x "
                "(rounds: " + ", ".join(f"{x:.2f}" for x in base_floor) + ")"
            )
        ours_ms = paired("this tree", "LangGraph floor", lambda ours, floor: ours - floor)
        shares = paired("this tree", "LangGraph floor", lambda ours, floor: floor / ours)
        lines += [
            "",
            f"Our code per run (this tree minus the floor), median of {args.rounds} paired "
            f"rounds: **{statistics.median(ours_ms):.1f} ms**; the floor is "
            f"{statistics.median(shares):.2f} of this tree's CPU (rounds: "
            + ", ".join(f"{x:.2f}" for x in shares)
            + ")",
        ]
        if "baseline tree" in trees:
            floor_of_base = paired("LangGraph floor", "baseline tree", lambda f, base: f / base)
            lines.append(
                f"\nThe floor against the baseline tree: {statistics.median(floor_of_base):.2f}"
                " (a loop doing nothing but these LangGraph steps could reach no lower ratio)."
            )
    command = "python bench/bench_runner.py " + " ".join(sys.argv[1:])
    text = "\n".join(
        [
            f"`{command.strip()}`",
            "",
            f"Load before: `{load_before}`; after: `{load_after}`",
            "",
            *lines,
        ]
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
