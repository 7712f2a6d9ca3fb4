"""Start-up cost: importing the library and starting the CLI, this tree against another.

Each command runs in a fresh interpreter, alternating between the two trees round by
round, so load drifts hit both alike; the ratio of the medians is the figure to trust.
Wall time of the whole process (what a person waits for) is measured, with the CPU the
child used (user + system) beside it.

    python bench/bench_startup.py --baseline-tree DIR [--rounds 15]

`DIR` is a checkout of another commit (`git archive <rev> | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parents[1]

COMMANDS: dict[str, list[str]] = {
    "import rubric_core": ["-c", "import rubric_core"],
    "from rubric_core import RubricMiddleware": ["-c", "from rubric_core import RubricMiddleware"],
    "python -m rubric_core --help": ["-m", "rubric_core", "--help"],
    "python -m rubric_core scenarios": ["-m", "rubric_core", "scenarios"],
}


def _once(tree: Path, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `python ARGS` in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=120,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    trees = {"this tree": _HERE, "baseline": args.baseline_tree.resolve()}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for tree in trees.values():  # warm the file cache and bytecode of both once
        for command in COMMANDS.values():
            _once(tree, command)
    for round_ in range(args.rounds):
        order = list(trees.items()) if round_ % 2 == 0 else list(reversed(trees.items()))
        for name, command in COMMANDS.items():
            for label, tree in order:
                times.setdefault((name, label), []).append(_once(tree, command))
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| command | this tree: wall ms (CPU ms) | baseline: wall ms (CPU ms) | ratio (wall) |")
    print("|---|---:|---:|---:|")
    for name in COMMANDS:
        ours, base = times[(name, "this tree")], times[(name, "baseline")]
        ours_wall = statistics.median(w for w, _ in ours)
        base_wall = statistics.median(w for w, _ in base)
        print(
            f"| `{name}` | {ours_wall * 1e3:.0f} ({statistics.median(c for _, c in ours) * 1e3:.0f})"
            f" | {base_wall * 1e3:.0f} ({statistics.median(c for _, c in base) * 1e3:.0f})"
            f" | {ours_wall / base_wall:.2f} |"
        )


if __name__ == "__main__":
    main()
