"""Run untrusted Python in a throwaway sandbox: bubblewrap namespaces, resource limits, no secrets.

The fences, outermost first: bubblewrap (new user, PID, mount, network, IPC and UTS
namespaces; only the interpreter's directories mounted, read-only; a size-limited tmpfs
as the only writable place; no-new-privileges), a fresh unprivileged uid per run on root
hosts, rlimits per process, a total-memory watch over all of the run's processes, a
wall clock, an allow-listed environment, and a Python audit hook as an early tripwire.

Without bubblewrap the sandbox refuses to run (`apt-get install bubblewrap`), unless
the caller opts in to the weaker fences that came before it (`allow_weak_fences=True`
or `RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK=1`), which warns.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_core import config as settings
from rubric_core.tools import _sandbox_bwrap as bw
from rubric_core.tools import _sandbox_weak as weak
from rubric_core.tools._sandbox_guard import SITECUSTOMIZE

if TYPE_CHECKING:
    from collections.abc import Callable

_UID_BASE = 1_700_000_000
"""Sandboxed processes run as a fresh uid from here on (root hosts only): one uid per
run means the process-count limit is per run and every leftover process of the run
can be found and killed by uid. `RUBRIC_STUDIO_SANDBOX_UID` fixes one uid instead (e.g. 65534)."""

_UID_SPAN = 1 << 24

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

_CONCURRENCY = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))
"""At most this many sandboxes run at once in one process; the rest queue."""

ALLOW_WEAK_ENV = "RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK"
"""Set to 1 to allow the weaker fences where bubblewrap is missing (a warning is issued);
the older `RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK` still works, with a `DeprecationWarning`."""

OLD_ALLOW_WEAK_ENV = "RUBRIC_SANDBOX_ALLOW_WEAK"
"""Its older name, read with a `DeprecationWarning` and named in the refusal for those who
set it before."""

UID_ENV = "RUBRIC_STUDIO_SANDBOX_UID"
NO_NAMESPACES_ENV = "RUBRIC_STUDIO_SANDBOX_NO_NAMESPACES"

_MONITOR_INTERVAL_S = 0.1

DEV_NULL = "/dev/null"
"""The host's null device, which bubblewrap's `--dev` binds into the sandbox (it cannot
make device nodes of its own without privileges the sandbox drops); checked first."""


def _dev_null_problem() -> str | None:
    """Why the host's /dev/null cannot serve the sandbox, in one line, or `None`.

    Examples:
        >>> _dev_null_problem() is None  # a healthy host
        True
    """
    try:
        mode = os.stat(DEV_NULL).st_mode
    except OSError as exc:
        return f"the host's {DEV_NULL} is missing or unreadable ({exc.strerror}); {_DEV_NULL_FIX}"
    if stat.S_ISCHR(mode):
        return None
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
    )
    kind = next((name for test, name in kinds if test(mode)), "not a character device")
    return f"the host's {DEV_NULL} is {kind}, not the null character device; {_DEV_NULL_FIX}"


_DEV_NULL_FIX = (
    "sandboxed code (pytest among it) cannot run until root restores it: "
    "rm -f /dev/null && mknod -m 666 /dev/null c 1 3"
)


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed run may use.

    Examples:
        >>> SandboxLimits(wall_s=5).memory_bytes // 2**20
        1024
    """

    wall_s: float = 30.0
    """Wall-clock seconds before the whole process group (and every process of the
    sandbox uid) is killed."""

    cpu_s: int = 20
    """CPU seconds per process (RLIMIT_CPU); past it the kernel kills the process."""

    memory_bytes: int = 1 << 30
    """Address space per process (RLIMIT_AS); allocations past it fail (MemoryError)."""

    nproc: int = 64
    """Processes the sandbox uid may have at once (RLIMIT_NPROC): a fork storm stops here."""

    fsize_bytes: int = 16 << 20
    """Largest file a process may write (RLIMIT_FSIZE), its output log included."""

    nofile: int = 256
    """Open file descriptors per process (RLIMIT_NOFILE)."""

    disk_bytes: int = 64 << 20
    """Size of the tmpfs that is the sandbox's only writable place (bubblewrap only):
    every file of every process together."""

    total_memory_bytes: int | None = None
    """Memory of all the sandbox's processes together (their proportional set size, so
    pages forked children share count once); past it they are all killed. Polled every 0.1 s, so a burst can briefly overshoot it. `None` means
    `memory_bytes`."""

    output_chars: int = 20_000
    """How much of the end of the combined output is kept."""


@dataclass
class SandboxResult:
    """What a sandboxed run did."""

    returncode: int | None
    """Exit status; negative when a signal killed it; `None` if it never started."""

    output: str
    """The tail of stdout and stderr together."""

    timed_out: bool = False
    """Whether the wall-clock limit was hit (the process group was then killed)."""

    duration_s: float = 0.0
    """Wall-clock seconds from start to exit (or kill)."""

    isolation: list[str] = field(default_factory=list)
    """What fenced the run in: uid, namespaces, hidden paths, limits."""

    error: str | None = None
    """Why the sandbox could not start the command, if it could not."""

    uid: int | None = None
    """The unprivileged uid the run used, when the host runs as root."""

    leftover_killed: int = 0
    """Processes still alive after the run that the cleanup killed."""

    output_bytes: int = 0
    """Total size of the combined output (it is capped by the file-size limit)."""

    memory_exceeded: bool = False
    """Whether the processes together went past the total memory limit (then killed)."""

    fences: str = "bubblewrap"
    """`bubblewrap`, or `weak` when bubblewrap was missing and the caller opted in."""

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that ended the run (`SIGKILL`, `SIGXCPU`, ...), if any."""
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def _processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break  # a zombie: already dead, waiting for its parent to reap it
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _count_processes(uid: int) -> int:
    return len(_processes_of(uid))


def kill_uid(uid: int) -> int:
    """SIGKILL every process whose real uid is `uid`, until none is left.

    Only used for the sandbox's own fresh uid. Returns how many were killed.
    """
    killed: set[int] = set()
    for _ in range(100):
        pids = _processes_of(uid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.02)
    return len(killed)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _pick_uid() -> tuple[int, bool]:
    fixed = settings.integer(UID_ENV)
    if fixed is not None:
        return fixed, False
    return _UID_BASE + secrets.randbelow(_UID_SPAN), True


def _rmtree(path: Path) -> None:
    def unlock(func: Callable[[str], object], target: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            func(target)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=unlock)
    else:
        shutil.rmtree(path, onerror=unlock)


def _tail(path: Path, limit_chars: int) -> str:
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            if size > limit_chars * 4:
                handle.seek(size - limit_chars * 4)
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit_chars:
        text = "[... output truncated ...]\n" + text[-limit_chars:]
    return text


def _tree(root_pid: int) -> list[int]:
    """`root_pid` and every process below it (orphans of a PID namespace are reaped by
    its init, which is below bubblewrap, so they stay in the tree)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                fields = stat_file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _memfd_bytes(pid: int, seen: set[tuple[int, int]]) -> int:
    """Memory in the `memfd_create` files `pid` holds open that `seen` has not counted yet.

    A memfd's pages belong to no process's set size unless mapped: one check held 2 GiB
    in memfds that the Pss watch never saw (each under the file-size limit, one per open
    file). Counted by what each file has allocated, once per file.
    """
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if not os.readlink(path).startswith("/memfd:"):
                continue
            info = os.stat(path)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    return total


def _memory_bytes(pids: list[int]) -> int:
    """Proportional set size (Pss) of `pids` together, plus the memfd files they hold
    open: a page shared by forked processes counts once in all, not once per process as
    resident size would; a mapped memfd can count twice (in Pss and as a file)."""
    total = 0
    memfds: set[tuple[int, int]] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
                for line in rollup:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            continue
        total += _memfd_bytes(pid, memfds)
    return total


def _pids_of_run(root_pid: int, uid: int | None) -> list[int]:
    pids = set(_tree(root_pid))
    if uid is not None:
        pids.update(_processes_of(uid))
    return sorted(pids)


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _wait_watching(
    process: subprocess.Popen[bytes], deadline: float, memory_cap: int, uid: int | None
) -> tuple[int, bool, bool]:
    """Wait for the sandbox; (returncode, timed_out, memory_exceeded). Every
    `_MONITOR_INTERVAL_S` the resident memory of all its processes is summed."""
    while True:
        try:
            remaining = deadline - time.monotonic()
            return process.wait(timeout=max(0.0, min(_MONITOR_INTERVAL_S, remaining))), False, False
        except subprocess.TimeoutExpired:
            pass
        pids = _pids_of_run(process.pid, uid)
        over_memory = _memory_bytes(pids) > memory_cap
        if over_memory or time.monotonic() >= deadline:
            _kill_group(process.pid)
            _kill_all(pids)
            return process.wait(), not over_memory, over_memory


def _weak_allowed(allow_weak_fences: bool | None) -> bool:
    if allow_weak_fences is not None:
        return allow_weak_fences
    return settings.flag(ALLOW_WEAK_ENV)


def run_sandboxed(
    args: list[str],
    files: dict[str, str],
    *,
    limits: SandboxLimits | None = None,
    allow_weak_fences: bool | None = None,
) -> SandboxResult:
    """Run `python <args>` in a fresh sandbox holding `files`, fenced in.

    With bubblewrap (Debian's `bubblewrap`, as Flatpak uses it) the child gets new
    user, PID, mount, network, IPC and UTS namespaces; it sees only the interpreter's
    directories and the system's shared libraries (read-only, no shell), its own files
    in a tmpfs of `limits.disk_bytes` (its cwd, HOME and TMPDIR, and /tmp), a /proc
    showing only its own processes, loopback only, no-new-privileges. On root hosts it
    runs as a fresh unprivileged uid (root ignores RLIMIT_NPROC). Always: a minimal
    environment (no inherited variables, so no API keys), CPU/memory/process/file-size
    limits per process, a total resident-memory limit over all its processes, a
    wall-clock timeout that kills them all, and an audit hook as a tripwire.
    Everything is deleted afterwards.

    Without bubblewrap it refuses (`.error` says to `apt-get install bubblewrap`)
    unless `allow_weak_fences` (or `RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK=1`) opts in to the
    fences that came before: a fresh uid in hand-made network and mount namespaces,
    which leave the host's files readable and its processes visible; it then warns.

    Environment knobs: `RUBRIC_STUDIO_SANDBOX_UID` fixes the uid (default: a fresh one per
    run); `RUBRIC_STUDIO_SANDBOX_BWRAP` names the bubblewrap binary;
    `RUBRIC_STUDIO_SANDBOX_NO_NAMESPACES=1` skips the namespaces of the weak fences.

    Args:
        args: Arguments after the interpreter, e.g. `["-m", "pytest", "-q"]`.
        files: Relative file names and their text, written into the directory.
        limits: Resource limits; `SandboxLimits()` when omitted.
        allow_weak_fences: Run with the weaker fences when bubblewrap is missing;
            `None` reads `RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK`.

    Returns:
        A `SandboxResult`; failures to start are in `.error`, never raised.
    """
    limits = limits or SandboxLimits()
    if (problem := _dev_null_problem()) is not None:
        return SandboxResult(returncode=None, output="", error=problem)
    bwrap = bw.find_bwrap()
    if bwrap is None:
        if not _weak_allowed(allow_weak_fences):
            return SandboxResult(
                returncode=None,
                output="",
                error=(
                    "bubblewrap (bwrap) is not installed, and untrusted code runs only inside "
                    f"it: install it with `{bw.INSTALL_HINT}` (Debian/Ubuntu; the package is "
                    "`bubblewrap` elsewhere too), or opt in to weaker fences that leave the "
                    f"host's files readable with {ALLOW_WEAK_ENV}=1 (formerly "
                    f"{OLD_ALLOW_WEAK_ENV}=1, still read)"
                ),
            )
        warnings.warn(
            "bubblewrap is missing: running untrusted code with weaker fences (the host's "
            f"files stay readable and its processes visible); `{bw.INSTALL_HINT}` fixes it",
            RuntimeWarning,
            stacklevel=2,
        )
    with _CONCURRENCY:
        return _run(args, files, limits, bwrap)


def _stage(root: Path, files: dict[str, str], inside_root: str) -> tuple[Path, Path]:
    """Write the test's files and the guard into `root`; (files dir, guard dir)."""
    src = root / "work"
    site_dir = root / "site"
    src.mkdir(mode=0o755)
    site_dir.mkdir(mode=0o755)
    (site_dir / "sitecustomize.py").write_text(
        SITECUSTOMIZE.replace("__ROOT__", repr(inside_root)).replace(
            "__SITE__", repr(bw.SITE_DIR if inside_root == bw.WORKDIR else str(site_dir))
        ),
        encoding="utf-8",
    )
    (site_dir / "sitecustomize.py").chmod(0o644)
    for name, text in files.items():
        target = (src / name).resolve()
        if not str(target).startswith(str(src.resolve()) + os.sep):
            msg = f"sandbox file name {name!r} points outside the sandbox directory"
            raise ValueError(msg)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        target.write_text(text, encoding="utf-8")
        target.chmod(0o644)
    return src, site_dir


def _run(
    args: list[str], files: dict[str, str], limits: SandboxLimits, bwrap: str | None
) -> SandboxResult:
    is_root = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="rubric-sandbox-"))
    try:
        root.chmod(0o755)
        inside = bw.WORKDIR if bwrap else str((root / "work").resolve())
        workdir, site_dir = _stage(root, files, inside)
        isolation: list[str] = []
        uid: int | None = None
        owns_uid = False
        if is_root:
            uid, owns_uid = _pick_uid()
        nproc = limits.nproc
        if not is_root:
            # RLIMIT_NPROC counts every process of the real uid; leave room for those.
            nproc += _count_processes(os.getuid())
            isolation.append("runs as the current user (host is not root)")
        rlimits = {
            "RLIMIT_CPU": int(limits.cpu_s),
            "RLIMIT_AS": int(limits.memory_bytes),
            "RLIMIT_NPROC": int(nproc),
            "RLIMIT_FSIZE": int(limits.fsize_bytes),
            "RLIMIT_NOFILE": int(limits.nofile),
            "RLIMIT_CORE": 0,
        }
        tmpdir = bw.TMPDIR if bwrap else str(workdir / "tmp")
        env = {
            "PATH": _SAFE_PATH,
            "HOME": inside,
            "TMPDIR": tmpdir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "PYTHONPATH": bw.SITE_DIR if bwrap else str(site_dir),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONIOENCODING": "utf-8",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "COLUMNS": "200",
        }
        status_read, status_write = os.pipe()
        config: dict[str, Any] = {
            "status_fd": status_write,
            "rlimits": rlimits,
            "uid": uid,
            "gid": uid,
            "workdir": inside,
            "argv": [sys.executable, *args],
            "env": env,
        }
        if bwrap:
            prefix, notes = bw.bwrap_argv(
                bwrap,
                host_src=str(workdir),
                host_site=str(site_dir),
                disk_bytes=limits.disk_bytes,
                drop_to_uid=uid is not None,
            )
            isolation.extend(notes)
            config.update(src=bw.SRC_DIR, tmpdir=tmpdir, sandbox=bw.SANDBOX_DIR)
            command = [*prefix, "--", sys.executable, "-I", "-S", "-c", bw.BOOTSTRAP]
        else:
            prepared = _prepare_weak(workdir, uid, config, root)
            if isinstance(prepared, SandboxResult):
                os.close(status_read)
                os.close(status_write)
                return prepared
            command = [sys.executable, "-I", "-S", "-c", weak.BOOTSTRAP]
        log_path = root / "output.log"
        started = time.monotonic()
        with log_path.open("wb") as log:
            try:
                process = subprocess.Popen(
                    [*command, json.dumps(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={"PATH": _SAFE_PATH},
                    pass_fds=(status_write,),
                    start_new_session=True,
                    cwd=str(root),
                )
            except OSError as exc:
                os.close(status_read)
                os.close(status_write)
                return SandboxResult(returncode=None, output="", error=f"could not start: {exc}")
        os.close(status_write)
        with os.fdopen(status_read, "rb") as status_pipe:
            raw_status = status_pipe.read()
        try:
            status = json.loads(raw_status or b"{}")
        except json.JSONDecodeError:
            status = {}
        isolation.extend(status.get("notes", []))
        returncode, timed_out, memory_exceeded = _wait_watching(
            process,
            started + limits.wall_s,
            limits.total_memory_bytes or limits.memory_bytes,
            uid if owns_uid else None,
        )
        duration = time.monotonic() - started
        if bwrap and returncode is not None and 128 < returncode < 128 + 65:
            returncode = 128 - returncode  # bubblewrap exits 128+N when a signal N ended the child
        # Background children left behind (in the group, or escaped with setsid).
        _kill_group(process.pid)
        leftovers = kill_uid(uid) if (uid is not None and owns_uid) else 0
        isolation.append(
            f"limits: cpu {limits.cpu_s}s, memory {limits.memory_bytes >> 20} MiB, "
            f"{limits.nproc} processes, files {limits.fsize_bytes >> 20} MiB, wall {limits.wall_s:g}s"
        )
        total = (limits.total_memory_bytes or limits.memory_bytes) >> 20
        isolation.append(
            f"memory of all processes together: {total} MiB of Pss plus memfd files, "
            f"polled every {_MONITOR_INTERVAL_S:g} s (no cgroup)"
        )
        output = _tail(log_path, limits.output_chars)
        error = None
        if not status.get("ok", False):
            error = status.get("error") or (
                "the sandbox did not start: " + (output.strip().splitlines() or ["no output"])[-1]
            )
        return SandboxResult(
            returncode=returncode,
            output=output,
            timed_out=timed_out,
            duration_s=duration,
            isolation=isolation,
            error=error,
            uid=uid,
            leftover_killed=leftovers,
            output_bytes=log_path.stat().st_size,
            memory_exceeded=memory_exceeded,
            fences="bubblewrap" if bwrap else "weak",
        )
    finally:
        _rmtree(root)


def _prepare_weak(
    workdir: Path, uid: int | None, config: dict[str, Any], root: Path
) -> SandboxResult | None:
    """Fill `config` for the weak fences' bootstrap; a result when it must refuse."""
    (workdir / "tmp").mkdir(mode=0o700)
    workdir.chmod(0o700)
    reveal: dict[str, list[str]] = {}
    if uid is not None:
        reveal, unfixable = weak.reveal_plan(bw.needed_paths())
        if unfixable:
            return SandboxResult(
                returncode=None,
                output="",
                error=(
                    "cannot run untrusted code as an unprivileged user: the interpreter "
                    f"path {unfixable[0]} is not readable by other users; refusing to "
                    "run it as root"
                ),
                fences="weak",
            )
        for path in (workdir, *workdir.rglob("*")):
            os.chown(path, uid, uid)
    config.update(
        namespaces=uid is not None and not settings.text(NO_NAMESPACES_ENV),
        clone_flags=weak.CLONE_FLAGS,
        reveal=reveal,
        keep=weak.kept_in_private_tmp(str(root.resolve()), bw.needed_paths()),
        private_tmp=list(weak.PRIVATE_TMP),
    )
    return None
