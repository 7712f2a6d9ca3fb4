"""One JSON job in a fresh interpreter with a wall-clock limit: for work `re` cannot interrupt."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def run_json_job(
    script: str, job: object, *, timeout_s: float, site_packages: bool = False
) -> tuple[dict[str, Any] | None, str]:
    """Run `script` with `job` as JSON on stdin; (its JSON stdout, "") or (None, why not).

    A fresh interpreter (not fork) is safe in a process full of threads; `-I` keeps the
    caller's environment and working directory out, `site_packages=False` adds `-S`.

    Raises:
        subprocess.TimeoutExpired: The script ran past `timeout_s`; it has been killed.

    Examples:
        >>> run_json_job("import json, sys; print(json.dumps(json.load(sys.stdin)))", {"a": 1}, timeout_s=30)
        ({'a': 1}, '')
    """
    flags = ["-I"] if site_packages else ["-I", "-S"]
    completed = subprocess.run(
        [sys.executable, *flags, "-c", script],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={"PYTHONIOENCODING": "utf-8"},
    )
    try:
        outcome = json.loads(completed.stdout)
    except json.JSONDecodeError:
        return None, completed.stderr.strip()[-300:] or "no output"
    if not isinstance(outcome, dict):
        return None, f"unexpected output {completed.stdout[:100]!r}"
    return outcome, ""
