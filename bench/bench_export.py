"""Benchmark the criteria CSV export against the slow path it replaced, in the same run.

The baseline is `tests/support/export_reference.py`: one joined query, `csv.writer`, every cell
neutralised on its own (the export before the fast path, with the columns and the formula rule
added since, so both sides write the same bytes). The new path is `rubric_core.export`:
three cursors (passes, verdicts, labels) in one read snapshot, each pass's cells quoted
once. Runs alternate between the two (interleaved), so machine load hits both alike; the
ratio is the figure to trust.
Every timed run's bytes are hashed and compared, and peak Python memory is measured at
two store sizes to show it stays flat. `--against REV` also times `rubric_core/export.py`
(with its `cells.py`) as it was at git revision REV, in the same rotation; `--no-reference`
leaves the slow path out (it takes minutes on 1M rows).

    python bench/bench_export.py [--runs 20000] [--repeats 3] [--data-dir D --keep]
                                 [--against c2066f9 [--no-reference]]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import io
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate_store import generate

from rubric_core.export import write_csv
from rubric_core.store import RunFilters, Store
from tests.support.export_reference import reference_criteria_csv

RESULTS = Path(__file__).resolve().parent / "results" / "export.md"


class _HashSink(io.TextIOBase):
    """A text stream that hashes what it is given (UTF-8) and keeps nothing."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.chars = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.digest.update(text.encode("utf-8"))
        self.chars += len(text)
        return len(text)


def _new(store: Store, sink: io.TextIOBase) -> int:
    return write_csv(store, sink, "criteria")


def _old(store: Store, sink: io.TextIOBase) -> int:
    return reference_criteria_csv(store, sink, RunFilters())


def _previous(rev: str, into: Path) -> Callable[[Store, io.TextIOBase], int]:
    """`write_csv` of the criteria dataset as `rubric_core/export.py` and `cells.py` were at
    git revision `rev` (loaded as package `rubric_previous`; the store is today's)."""
    root = Path(__file__).resolve().parents[1]
    package = into / "rubric_previous"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in ("cells", "export"):
        shown = subprocess.run(
            ["git", "-C", str(root), "show", f"{rev}:rubric_core/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        text = shown.replace("from rubric_core.cells import", "from rubric_previous.cells import")
        (package / f"{name}.py").write_text(text, encoding="utf-8")
    sys.path.insert(0, str(into))
    module = importlib.import_module("rubric_previous.export")
    return lambda store, sink: int(module.write_csv(store, sink, "criteria"))


def _timed(fn: Callable[[Store, io.TextIOBase], int], store: Store) -> tuple[float, int, str]:
    sink = _HashSink()
    began = time.perf_counter()
    rows = fn(store, sink)
    return time.perf_counter() - began, rows, sink.digest.hexdigest()


def _peak(fn: Callable[[Store, io.TextIOBase], int], store: Store) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn(store, _HashSink())
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _median_ratio(top: list[float], bottom: list[float]) -> tuple[float, str]:
    ratios = [a / b for a, b in zip(top, bottom, strict=True)]
    return statistics.median(ratios), ", ".join(f"{r:.2f}" for r in ratios)


def run(
    *,
    runs: int,
    passes: int,
    criteria: int,
    repeats: int,
    data_dir: Path,
    keep: bool = False,
    against: str | None = None,
    reference: bool = True,
) -> str:
    sizes = {"export-big.db": runs, "export-small.db": max(1, runs // 10)}
    for name, count in sizes.items():
        if not (keep and (data_dir / name).exists()):
            generate(data_dir / name, runs=count, passes=passes, criteria=criteria)
    big_path, small_path = data_dir / "export-big.db", data_dir / "export-small.db"
    paths: dict[str, Callable[[Store, io.TextIOBase], int]] = {}
    if reference:
        paths["old"] = _old
    if against is not None:
        paths["previous"] = _previous(against, Path(tempfile.mkdtemp(prefix="rubric-prev-")))
    paths["new"] = _new
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    began = time.gmtime()
    lines: list[str] = []
    with Store(big_path) as big, Store(small_path) as small:
        _timed(_new, big)  # warm the page cache for every path
        seconds: dict[str, list[float]] = {name: [] for name in paths}
        rows = 0
        for repeat in range(repeats):
            names = list(paths)
            names = names[repeat % len(names) :] + names[: repeat % len(names)]  # rotate
            results = {name: _timed(paths[name], big) for name in names}
            if len({(count, digest) for _, count, digest in results.values()}) != 1:
                msg = f"the paths differ: {results}"
                raise SystemExit(msg)
            rows = results["new"][1]
            for name, (spent, _, _) in results.items():
                seconds[name].append(spent)
            shown = ", ".join(f"{name} {results[name][0]:.2f} s" for name in paths)
            print(f"round {repeat + 1}: {shown}, {rows:,} rows", flush=True)
        peaks = {"new, small store": _peak(_new, small), "new, big store": _peak(_new, big)}
        if reference:
            peaks["old, small store"] = _peak(_old, small)
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    medians = {name: statistics.median(spent) for name, spent in seconds.items()}
    command = f"python bench/bench_export.py --runs {runs} --repeats {repeats}"
    if against is not None:
        command += f" --against {against}" + ("" if reference else " --no-reference")
    lines += [
        "## CSV export of the criteria dataset: new path against the old, same run",
        "",
        f"Command: `{command}`  ",
        f"Measured {time.strftime('%Y-%m-%d %H:%M', began)}-{time.strftime('%H:%M UTC', time.gmtime())} "
        f"on {platform.machine()}, Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, {os.cpu_count()} CPUs; load average (1/5/15 min) "
        f"{' '.join(load_before)} before, {' '.join(load_after)} after.",
        "",
        f"Store: {runs:,} runs × {passes} passes × {criteria} criteria = {rows:,} criterion "
        f"rows; {repeats} rounds of {', '.join(paths)} (order rotated each round), each "
        "writing to a hashing sink; the bytes of every round are identical (SHA-256 compared).",
        "",
        "| path | median seconds | rows/s | peak Python memory |",
        "|---|---:|---:|---:|",
    ]
    if reference:
        lines.append(
            f"| old: one joined query, csv.writer | {medians['old']:.2f} | "
            f"{rows / medians['old']:,.0f} | {peaks['old, small store'] / 1e6:.1f} MB "
            "(10× smaller store) |"
        )
    if against is not None:
        lines.append(
            f"| previous: rubric_core/export.py at {against} | {medians['previous']:.2f} | "
            f"{rows / medians['previous']:,.0f} | – |"
        )
    lines += [
        f"| new: three cursors (passes, verdicts, labels), one snapshot | {medians['new']:.2f} | "
        f"{rows / medians['new']:,.0f} | {peaks['new, big store'] / 1e6:.1f} MB |",
        "",
    ]
    for name in ("old", "previous"):
        if name in seconds:
            median, each = _median_ratio(seconds["new"], seconds[name])
            lines.append(
                f"Time ratio new/{name}, median of the per-round ratios: {median:.2f} "
                f"(rounds: {each}).  "
            )
    lines.append(
        f"Peak memory of the new path on a 10× smaller store: "
        f"{peaks['new, small store'] / 1e6:.1f} MB, so 10× the rows costs "
        f"{peaks['new, big store'] / peaks['new, small store']:.2f}× the memory."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: `python bench/bench_export.py [--runs 20000] [--repeats 3]`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--criteria", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="reuse the stores in --data-dir")
    parser.add_argument("--data-dir", type=Path, default=None, help="where to generate the stores")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--against", default=None, help="also time rubric_core/export.py at this git revision"
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="leave out the slow csv.writer path"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rubric-bench-") as tmp:
        report = run(
            runs=args.runs,
            passes=args.passes,
            criteria=args.criteria,
            repeats=args.repeats,
            data_dir=args.data_dir or Path(tmp),
            keep=args.keep,
            against=args.against,
            reference=not args.no_reference,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n", encoding="utf-8")
    print(f"\n{report}\n\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
