"""The run_test_suite grader tool: pytest against the agent's code, inside the sandbox."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_core.tools import StructuredTool, tool

from rubric_core.extras import MissingExtra
from rubric_core.tools.sandbox import SandboxLimits, SandboxResult, run_sandboxed

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

_MAX_SOURCE_CHARS = 200_000
"""Longest code or test source accepted."""

_MAX_RESULT_CHARS = 4_000
"""Longest tool result handed back to the grader."""

MODULE_NAME = "solution"
"""The agent's code is saved as `solution.py`; tests import from it."""

_TEST_FILE = "test_solution.py"
_PYTEST_ARGS = [
    "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", "--tb=short", "--color=no",
    "-c", "pytest.ini", "--rootdir", ".", _TEST_FILE,
]  # fmt: skip
_SUMMARY_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
_SHORT_SUMMARY_RE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$", re.MULTILINE)

DEFAULT_LIMITS = SandboxLimits()
"""Limits `run_test_suite` uses: 30 s wall clock, 20 s CPU, 1 GiB, 64 processes."""


@dataclass
class TestRunResult:
    """A test-suite run, summarised for the grader."""

    __test__ = False  # not a pytest test class

    status: str
    """`PASSED`, `FAILED`, `ERROR`, `TIMEOUT` or `KILLED`."""

    text: str
    """The tool result: a status line first, then failures and the output's tail."""

    counts: dict[str, int] = field(default_factory=dict)
    """pytest's tallies: passed, failed, error, skipped..."""

    failures: list[str] = field(default_factory=list)
    """`test_name - Exception: message` per failing test."""

    sandbox: SandboxResult | None = None
    """The raw sandbox result (exit code, isolation notes, output)."""


def _counts(output: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    lines = [
        line for line in output.splitlines() if " in " in line and _SUMMARY_COUNT_RE.search(line)
    ]
    if lines:
        for number, word in _SUMMARY_COUNT_RE.findall(lines[-1]):
            key = "error" if word.startswith("error") else word
            counts[key] = counts.get(key, 0) + int(number)
    return counts


def _failures(output: str) -> list[str]:
    found = []
    for kind, node, message in _SHORT_SUMMARY_RE.findall(output):
        name = node.split("::", 1)[-1] if "::" in node else node
        found.append(f"{kind} {name}" + (f" - {message.strip()}" if message else ""))
    return found


def _tally(counts: dict[str, int]) -> str:
    order = ("failed", "error", "passed", "skipped", "xfailed", "xpassed")
    parts = [f"{counts[key]} {key}" for key in order if counts.get(key)]
    return ", ".join(parts) or "no tests ran"


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return "[...]\n" + text[-limit:]


def _summarise(result: SandboxResult, limits: SandboxLimits) -> TestRunResult:
    output = result.output
    counts = _counts(output)
    failures = _failures(output)
    memory_mib = limits.memory_bytes >> 20
    notes = []
    if "MemoryError" in output:
        notes.append(f"note: the {memory_mib} MiB memory limit was hit (MemoryError)")
    if "sandbox: " in output:
        refused = sorted(set(re.findall(r"^E +\w+Error: sandbox: ([^\n:'\"]+)", output, re.M)))
        notes.extend(f"note: the sandbox refused: {what}" for what in refused)
    if "BlockingIOError" in output or "Resource temporarily unavailable" in output:
        notes.append(f"note: the process limit ({limits.nproc}) stopped new processes")
    if "No space left on device" in output:
        notes.append(
            f"note: the sandbox's writable space ({limits.disk_bytes >> 20} MiB for all files) is full"
        )

    if result.error and result.returncode in (None, 97):
        status, head = "ERROR", f"ERROR: the sandbox could not run the tests: {result.error}"
    elif result.memory_exceeded:
        total_mib = (limits.total_memory_bytes or limits.memory_bytes) >> 20
        status = "KILLED"
        head = (
            f"KILLED: the tests' processes together used more than the {total_mib} MiB "
            "memory limit; all of them were killed"
        )
    elif result.timed_out:
        status = "TIMEOUT"
        head = (
            f"TIMEOUT after {limits.wall_s:g}s: the tests did not finish (infinite loop or "
            "blocking call?); the whole process group was killed"
        )
    elif result.signal_name == "SIGXCPU" or (
        result.signal_name == "SIGKILL" and result.duration_s >= limits.cpu_s * 0.9
    ):
        status, head = "KILLED", f"KILLED: CPU time limit of {limits.cpu_s}s exceeded"
    elif result.signal_name == "SIGXFSZ" or result.output_bytes >= limits.fsize_bytes:
        status = "KILLED"
        head = f"KILLED: output or file size limit ({limits.fsize_bytes >> 20} MiB) exceeded"
    elif result.signal_name in ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS"):
        status = "KILLED"
        head = f"KILLED: killed by {result.signal_name} (likely the {memory_mib} MiB memory limit)"
    elif "No module named pytest" in output:
        status, head, failures = "ERROR", _no_pytest(), []
    elif result.returncode == 0:
        status, head = "PASSED", f"PASSED: {_tally(counts)}"
    elif result.returncode == 1:
        status, head = "FAILED", f"FAILED: {_tally(counts)}"
    elif result.returncode == 5:
        status, head = "ERROR", "ERROR: no tests were collected; define functions named test_*"
    else:
        status = "ERROR"
        head = f"ERROR: the tests could not run (pytest exit code {result.returncode})"
        errors = [line[1:].strip() for line in output.splitlines() if line.startswith("E ")]
        failures = [*failures, *dict.fromkeys(errors[:5])]
        if not failures:
            failures = [line for line in output.strip().splitlines() if line.strip()][-3:]
    lines = [head, *failures, *notes]
    text = "\n".join(lines)
    if status != "PASSED" and output.strip():
        room = max(500, _MAX_RESULT_CHARS - len(text))
        if result.output_bytes >= limits.fsize_bytes:
            room = 300
        text += "\n\n--- pytest output (end) ---\n" + _clip(output.strip(), room)
    return TestRunResult(
        status=status,
        text=text[: _MAX_RESULT_CHARS * 2],
        counts=counts,
        failures=failures,
        sandbox=result,
    )


def _no_pytest() -> str:
    """The result's status line when the interpreter that runs the tests has no pytest."""
    return (
        f"ERROR: {MissingExtra('pytest', 'sandbox')} (into {sys.executable}'s environment, "
        "the interpreter that runs the tests; requirements.txt brings it too)"
    )


def run_pytest(code: str, tests: str, *, limits: SandboxLimits | None = None) -> TestRunResult:
    """Run pytest `tests` against `code` (saved as `solution.py`) in the sandbox.

    If the tests never mention `solution`, `from solution import *` is prepended so
    tests written against bare function names still find them.

    Examples:
        >>> run_pytest("def add(a, b): return a + b", "def test_add(): assert add(1, 2) == 3").status
        'PASSED'
    """
    limits = limits or DEFAULT_LIMITS
    if importlib.util.find_spec("pytest") is None:  # the core install: [sandbox] brings it
        return TestRunResult("ERROR", _no_pytest())
    if not code.strip():
        return TestRunResult("ERROR", "ERROR: no code given: pass the Python source to test")
    if not tests.strip():
        return TestRunResult("ERROR", "ERROR: no tests given: pass a pytest test module")
    for label, source in (("code", code), ("tests", tests)):
        if len(source) > _MAX_SOURCE_CHARS:
            return TestRunResult(
                "ERROR",
                f"ERROR: the {label} is {len(source):,} characters; the limit is {_MAX_SOURCE_CHARS:,}",
            )
    if not re.search(rf"\b{MODULE_NAME}\b", tests):
        tests = f"from {MODULE_NAME} import *  # added by run_test_suite\n\n{tests}"
    files = {
        f"{MODULE_NAME}.py": code,
        _TEST_FILE: tests,
        "pytest.ini": "[pytest]\n",
    }
    return _summarise(run_sandboxed(_PYTEST_ARGS, files, limits=limits), limits)


@tool
def run_test_suite(code: str, tests: str) -> str:
    """Run a pytest test suite against Python code in an isolated sandbox.

    `code` is saved as `solution.py`; `tests` is a pytest module (`from solution import ...`).
    Returns PASSED/FAILED with counts and each failing test with its error, or
    TIMEOUT / KILLED / ERROR with the reason. No network; 30 s limit.
    """
    return run_pytest(code, tests).text


def make_run_test_suite(
    tests: str, *, name: str = "run_test_suite", limits: SandboxLimits | None = None
) -> BaseTool:
    """A `run_test_suite` with a fixed test suite: the grader passes only the code.

    Args:
        tests: The pytest module every call runs.
        name: The tool's name as the grader sees it.
        limits: Sandbox limits; `DEFAULT_LIMITS` when omitted.

    Raises:
        ValueError: If `tests` is empty.
    """
    if not tests.strip():
        msg = "tests must be a non-empty pytest module"
        raise ValueError(msg)

    def run(code: str) -> str:
        return run_pytest(code, tests, limits=limits).text

    return StructuredTool.from_function(
        func=run,
        name=name,
        description=(
            "Run the fixed pytest suite against Python code in an isolated sandbox. Pass the "
            "complete code (saved as solution.py). Returns PASSED/FAILED with each failing "
            "test and its error, or TIMEOUT / KILLED / ERROR."
        ),
    )
