"""Code checks on adversarial drafts: time against length, this tree's checks and the
regular expressions they replaced (issue 22 item 7).

For each input the time is taken at a length and at twice that length: a linear check
takes about twice as long (ratio ~2), a quadratic one about four times (ratio ~4). The
old regular expressions run only at small lengths (at full length they took 177 s and
94 s).

    python bench/bench_checks.py [--length 120000]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

from rubric_core.tools.checks import run_check

_OLD_SENTENCE_RE = re.compile(r"[^.!?\n]*[A-Za-z0-9][^.!?\n]*(?:[.!?]+|$)", re.MULTILINE)
_OLD_FENCE_RE = re.compile(
    r"^[ \t]*```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE
)


def _seconds(fn, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _row(label: str, make, fn, length: int) -> None:
    one, two = _seconds(lambda: fn(make(length))), _seconds(lambda: fn(make(2 * length)))
    print(f"| {label} | {length:,} | {one * 1000:.1f} ms | {two * 1000:.1f} ms | {two / one:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--length", type=int, default=120_000)
    length = parser.parse_args().length
    fences = length // 5  # "```json\n" is 8 characters: 24,000 fences at 120,000 / 5
    print("| check (input) | length | time | time at 2x | ratio |")
    print("|---|---:|---:|---:|---:|")
    _row(
        "{words <= 150} (spaces)",
        lambda n: " " * n,
        lambda d: run_check("words", "<= 150", d),
        length,
    )
    _row(
        "{sentences <= 150} (spaces)",
        lambda n: " " * n,
        lambda d: run_check("sentences", "<= 150", d),
        length,
    )
    _row(
        "{json} (unclosed fences)",
        lambda n: "```json\n" * n,
        lambda d: run_check("json", "", d),
        fences,
    )
    small = 3_000
    _row("old sentence regex (spaces)", lambda n: " " * n, _OLD_SENTENCE_RE.findall, small)
    _row(
        "old fence regex (unclosed fences)",
        lambda n: "```json\n" * n,
        _OLD_FENCE_RE.findall,
        small // 5,
    )


if __name__ == "__main__":
    main()
