"""Which process owns a running run, and whether that process is still alive."""

from __future__ import annotations

import os
import socket
from typing import NamedTuple

__all__ = ["Owner", "current_owner", "pid_alive", "process_start"]


class Owner(NamedTuple):
    """The process a `running` run belongs to; `proc_start` tells a reused pid apart."""

    pid: int
    host: str
    proc_start: str | None


def process_start(pid: int) -> str | None:
    """The kernel's start time of a process (Linux), to tell a reused pid from the original."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is the state (field 3); starttime is field 22.
    return fields[19] if len(fields) > 19 else None


def current_owner() -> Owner:
    """This process, as a run's owner."""
    pid = os.getpid()
    return Owner(pid, socket.gethostname(), process_start(pid))


def pid_alive(pid: int | None, proc_start: str | None) -> bool:
    """Whether process `pid` on this host is the live process that started at `proc_start`.

    Examples:
        >>> pid_alive(os.getpid(), None), pid_alive(None, None)
        (True, False)
    """
    if not pid or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc: trust kill(0)
    if state in ("Z", "X"):
        return False
    return proc_start is None or process_start(pid) == proc_start
