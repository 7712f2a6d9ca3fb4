"""Benchmark the criteria CSV export against the slow path it replaced, in the same run.

The baseline is `tests/export_reference.py`: one joined query, `csv.writer`, every cell
neutralised on its own (the export before issue 12, with the columns and the formula rule
added since, so both sides write the same bytes). The new path is `rubric_core.export`:
three cursors (passes, verdicts, labels) in one read snapshot, each pass's cells quoted
once. Runs alternate between the two (interleaved), so machine load hits both alike; the
ratio is the figure to trust.
Every timed run's bytes are hashed and compared, and peak Python memory is measured at
two store sizes to show it stays flat.

    python bench/bench_export.py [--runs 20000] [--repeats 3] [--data-dir D --keep]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import os
import platform
import sqlite3
import statistics
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
from tests.export_reference import reference_criteria_csv

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


def run(
    *, runs: int, passes: int, criteria: int, repeats: int, data_dir: Path, keep: bool = False
) -> str:
    sizes = {"export-big.db": runs, "export-small.db": max(1, runs // 10)}
    for name, count in sizes.items():
        if not (keep and (data_dir / name).exists()):
            generate(data_dir / name, runs=count, passes=passes, criteria=criteria)
    big_path, small_path = data_dir / "export-big.db", data_dir / "export-small.db"
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    lines: list[str] = []
    with Store(big_path) as big, Store(small_path) as small:
        _timed(_new, big)  # warm the page cache for both
        old_s: list[float] = []
        new_s: list[float] = []
        ratios: list[float] = []
        rows = 0
        for _ in range(repeats):
            old, old_rows, old_hash = _timed(_old, big)
            new, new_rows, new_hash = _timed(_new, big)
            if (old_rows, old_hash) != (new_rows, new_hash):
                msg = f"the paths differ: {old_rows} rows {old_hash} vs {new_rows} rows {new_hash}"
                raise SystemExit(msg)
            rows = new_rows
            print(f"pair: old {old:.2f} s, new {new:.2f} s, {rows:,} rows", flush=True)
            old_s.append(old)
            new_s.append(new)
            ratios.append(new / old)
        peaks = {
            "new, small store": _peak(_new, small),
            "new, big store": _peak(_new, big),
            "old, small store": _peak(_old, small),
        }
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    old_med, new_med = statistics.median(old_s), statistics.median(new_s)
    lines += [
        "## CSV export of the criteria dataset: new path against the old, same run",
        "",
        f"Command: `python bench/bench_export.py --runs {runs} --repeats {repeats}`  ",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{platform.machine()}, Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, {os.cpu_count()} CPUs; load average (1/5/15 min) "
        f"{' '.join(load_before)} before, {' '.join(load_after)} after.",
        "",
        f"Store: {runs:,} runs × {passes} passes × {criteria} criteria = {rows:,} criterion "
        f"rows; {repeats} interleaved pairs (old, new), each writing to a hashing sink; the "
        "bytes of every pair are identical (SHA-256 compared).",
        "",
        "| path | median seconds | rows/s | peak Python memory |",
        "|---|---:|---:|---:|",
        f"| old: one joined query, csv.writer | {old_med:.2f} | {rows / old_med:,.0f} | "
        f"{peaks['old, small store'] / 1e6:.1f} MB (10× smaller store) |",
        f"| new: three cursors (passes, verdicts, labels), one snapshot | {new_med:.2f} | "
        f"{rows / new_med:,.0f} | "
        f"{peaks['new, big store'] / 1e6:.1f} MB |",
        "",
        f"Time ratio new/old, median of the paired ratios: {statistics.median(ratios):.2f} "
        f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)}).  ",
        f"Peak memory of the new path on a 10× smaller store: "
        f"{peaks['new, small store'] / 1e6:.1f} MB, so 10× the rows costs "
        f"{peaks['new, big store'] / peaks['new, small store']:.2f}× the memory.",
    ]
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
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rubric-bench-") as tmp:
        report = run(
            runs=args.runs,
            passes=args.passes,
            criteria=args.criteria,
            repeats=args.repeats,
            data_dir=args.data_dir or Path(tmp),
            keep=args.keep,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n", encoding="utf-8")
    print(f"\n{report}\n\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
