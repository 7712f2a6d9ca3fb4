"""Run untrusted Python in a throwaway directory: resource limits, no secrets, no network, no root."""

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
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

_UID_BASE = 1_700_000_000
"""Sandboxed processes run as a fresh uid from here on (root hosts only): one uid per
run means the process-count limit is per run and every leftover process of the run
can be found and killed by uid. `RUBRIC_SANDBOX_UID` fixes one uid instead (e.g. 65534)."""

_UID_SPAN = 1 << 24

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

_CONCURRENCY = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))
"""At most this many sandboxes run at once in one process; the rest queue."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000

# The bootstrap runs as root (when the host is root) in a fresh, single-threaded
# interpreter: it enters new network and mount namespaces, hides directories the
# unprivileged user cannot reach anyway except for the interpreter's own path, sets
# the resource limits, drops to the sandbox uid and execs the real command. Doing
# this in a child of its own avoids `preexec_fn`, which is unsafe in threaded hosts.
_BOOTSTRAP = r"""
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
notes = []
no_namespaces = None if cfg["namespaces"] else "disabled"
def report(extra):
    os.write(status_fd, json.dumps(dict(extra, notes=notes)).encode())
    os.close(status_fd)
try:
    if cfg["namespaces"]:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        def mount(src, dst, fstype, flags, data):
            if libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), flags, data and data.encode()) != 0:
                raise OSError(ctypes.get_errno(), "mount " + dst + ": " + os.strerror(ctypes.get_errno()))
        if libc.unshare(cfg["clone_flags"]) != 0:
            no_namespaces = os.strerror(ctypes.get_errno())
            notes.append("namespaces unavailable: " + no_namespaces)
        else:
            notes.append("network namespace (no interfaces up)")
            mount(None, "/", None, 16384 | 262144, None)  # MS_REC | MS_PRIVATE
            for blocked, children in cfg["reveal"].items():
                fds = {c: os.open(os.path.join(blocked, c), os.O_PATH | os.O_DIRECTORY) for c in children}
                mount("tmpfs", blocked, "tmpfs", 2 | 4, "mode=0755,size=1m")  # MS_NOSUID | MS_NODEV
                for child, fd in fds.items():
                    target = os.path.join(blocked, child)
                    os.mkdir(target, 0o755)
                    mount("/proc/self/fd/%d" % fd, target, None, 4096 | 16384, None)  # MS_BIND | MS_REC
                    os.close(fd)
                notes.append("hid " + blocked + " except " + ", ".join(children))
            for shared in cfg["private_tmp"]:
                if not os.path.isdir(shared) or os.path.islink(shared):
                    continue
                # the sandbox's own directory, and the interpreter if it lives in a temp dir
                # (a venv under /tmp), are bound back into the fresh tmpfs
                inside = [k for k in cfg["keep"] if k.startswith(shared.rstrip("/") + "/")]
                fds = {k: os.open(k, os.O_PATH | os.O_DIRECTORY) for k in inside}
                mount("tmpfs", shared, "tmpfs", 2 | 4, "mode=1777,size=64m")
                for keep, fd in fds.items():
                    os.makedirs(keep, 0o755)
                    mount("/proc/self/fd/%d" % fd, keep, None, 4096 | 16384, None)
                    os.close(fd)
            notes.append("private " + ", ".join(cfg["private_tmp"]))
    if no_namespaces and cfg["reveal"]:
        raise PermissionError(
            "the interpreter lives under " + ", ".join(cfg["reveal"]) + ", which the "
            "unprivileged sandbox user cannot enter, and mount namespaces are unavailable ("
            + no_namespaces + "); refusing to run untrusted code as root"
        )
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if cfg["uid"] is not None:
        os.setgroups([])
        os.setgid(cfg["gid"])
        os.setuid(cfg["uid"])
        notes.append("uid %d" % cfg["uid"])
    os.chdir(cfg["workdir"])
    os.umask(0o077)
    report({"ok": True})
except BaseException as exc:
    report({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
    os._exit(97)
try:
    os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
except OSError as exc:
    os.write(2, ("sandbox: could not start %s: %s\n" % (cfg["argv"][0], exc)).encode())
    os._exit(97)
"""

# Installed as sitecustomize in the sandbox: a tripwire inside Python itself that
# refuses network sockets, writes outside the test directory, other processes'
# environments and shell commands. The OS-level limits above are the real fence.
_SITECUSTOMIZE = r'''
"""Rubric Studio sandbox guard (audit hook); see rubric_core/tools/sandbox.py."""
import os as _os
import re as _re
import socket as _socket
import sys as _sys

_ROOT = _os.path.realpath(__ROOT__)
_SITE = __SITE__
_PYTHON = {_os.path.realpath(_sys.executable), _sys.executable}
_DEVICES = {"/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr", "/dev/zero", "/dev/urandom"}
_WRITE_FLAGS = _os.O_WRONLY | _os.O_RDWR | _os.O_APPEND | _os.O_CREAT | _os.O_TRUNC
_ENVIRON_RE = _re.compile(r"^/proc/(\d+|thread-self|self)/(task/\d+/)?environ$")
_PATH_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,),
    "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,), "shutil.rmtree": (0,),
    "os.rename": (0, 1), "os.symlink": (1,), "os.link": (1,), "os.chflags": (0,),
    "os.setxattr": (0,), "os.removexattr": (0,), "os.mkfifo": (0,), "os.mknod": (0,),
}
_EXEC_EVENTS = {"os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen", "pty.spawn"}


def _real(path):
    try:
        return _os.path.realpath(_os.fsdecode(path))
    except Exception:
        return None


def _inside(path):
    return path is not None and (path == _ROOT or path.startswith(_ROOT + _os.sep))


def _deny(what):
    raise PermissionError("sandbox: " + what)


def _guard(event, args):
    if event == "open":
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return
        real = _real(path)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
            (flags or 0) & _WRITE_FLAGS
        )
        if writing and not _inside(real) and real not in _DEVICES:
            _deny("writing outside the test directory is not allowed: %s" % real)
        match = _ENVIRON_RE.match(real or "")
        if match and match.group(1) not in ("self", "thread-self", str(_os.getpid())):
            _deny("reading another process's environment is not allowed")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        sock = args[0]
        if getattr(sock, "family", None) != _socket.AF_UNIX:
            _deny("network access is not allowed")
    elif event in _PATH_EVENTS:
        for index in _PATH_EVENTS[event]:
            if index < len(args) and isinstance(args[index], (str, bytes, _os.PathLike)):
                if not _inside(_real(args[index])):
                    _deny("changing files outside the test directory is not allowed: %s" % _real(args[index]))
    elif event == "os.system":
        _deny("shell commands are not allowed")
    elif event in _EXEC_EVENTS:
        program = args[1] if event == "os.spawn" else args[0]
        argv = args[2] if event == "os.spawn" else args[1]
        if program is None and argv:
            program = list(argv)[0] if not isinstance(argv, (str, bytes)) else argv
        real = _real(program) if program is not None else None
        flags = [a for a in (list(argv or [])[1:] if not isinstance(argv, (str, bytes)) else []) if isinstance(a, str) and a.startswith("-") and not a.startswith("--")]
        if real not in _PYTHON and program not in _PYTHON:
            _deny("starting programs other than Python is not allowed: %s" % program)
        env = args[3] if event == "subprocess.Popen" else (args[2] if len(args) > 2 else None)
        guarded = env is None or (
            isinstance(env, dict) and _SITE in str(env.get("PYTHONPATH", env.get(b"PYTHONPATH", "")))
        )
        if not guarded or any(set(f[1:]) & set("IES") for f in flags[:3]):
            _deny("starting Python without the sandbox guard is not allowed")
    elif event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function"):
        _deny("native calls through ctypes are not allowed")


_sys.addaudithook(_guard)
'''


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

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that ended the run (`SIGKILL`, `SIGXCPU`, ...), if any."""
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def _other_can_traverse(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IXOTH)


def _reveal_plan(paths: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Directories the sandbox user cannot enter on the way to `paths`.

    Returns `(reveal, unfixable)`: `reveal` maps a blocked directory to the children the
    bootstrap bind-mounts back inside a tmpfs over it; `unfixable` lists paths blocked
    deeper down, which no single bind mount can open.
    """
    reveal: dict[str, set[str]] = {}
    unfixable: list[str] = []
    for raw in paths:
        parts = Path(raw).resolve().parts
        blocked = [
            depth for depth in range(1, len(parts)) if not _other_can_traverse(Path(*parts[:depth]))
        ]
        if len(blocked) == 1:
            depth = blocked[0]
            reveal.setdefault(str(Path(*parts[:depth])), set()).add(parts[depth])
        elif blocked:
            unfixable.append(raw)
    return {key: sorted(value) for key, value in reveal.items()}, unfixable


_PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def _kept_in_private_tmp(sandbox_root: str) -> list[str]:
    """Directories that must stay visible once the temp dirs are replaced: the sandbox's
    own, and the interpreter's when it lives in one (say, a CI venv under /tmp)."""
    candidates = sorted({sandbox_root, *(os.path.realpath(p) for p in _needed_paths())})
    under_tmp = [
        p
        for p in candidates
        if any(p.startswith(t + "/") for t in _PRIVATE_TMP) and os.path.isdir(p)
    ]
    # a directory inside another kept one comes along with it
    return [p for p in under_tmp if not any(p.startswith(q + "/") for q in under_tmp if q != p)]


def _needed_paths() -> list[str]:
    """The interpreter, its standard library, the environment's site-packages and the
    directories its `.pth` files add (the sandboxed interpreter reads them too)."""
    paths = {os.path.realpath(sys.executable), sys.prefix, sys.base_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path and os.path.isdir(path):
            paths.add(path)
    for site_dir in {sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")}:
        for pth in Path(site_dir or "/nonexistent").glob("*.pth"):
            try:
                lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                entry = line.strip()
                if entry.startswith("/") and os.path.isdir(entry):
                    paths.add(entry)
    return sorted(paths)


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
    fixed = os.environ.get("RUBRIC_SANDBOX_UID", "").strip()
    if fixed:
        return int(fixed), False
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


def run_sandboxed(
    args: list[str],
    files: dict[str, str],
    *,
    limits: SandboxLimits | None = None,
) -> SandboxResult:
    """Run `python <args>` in a fresh directory holding `files`, fenced in.

    The child gets: a new empty directory (its cwd, HOME and TMPDIR), a minimal
    environment (no inherited variables, so no API keys), CPU/memory/process/file-size
    limits, a wall-clock timeout that kills its whole process group, a Python audit hook
    refusing network, outside writes and shell commands, and on root hosts a fresh
    unprivileged uid (root ignores RLIMIT_NPROC) in its own network namespace, so
    even loopback is unreachable, with private /tmp, /var/tmp and /dev/shm. If the
    unprivileged uid cannot reach the interpreter and namespaces are unavailable, the
    run is refused rather than done as root. Everything is deleted afterwards.

    Environment knobs: `RUBRIC_SANDBOX_UID` fixes the uid (default: a fresh one per
    run); `RUBRIC_SANDBOX_NO_NAMESPACES=1` skips the namespaces.

    Args:
        args: Arguments after the interpreter, e.g. `["-m", "pytest", "-q"]`.
        files: Relative file names and their text, written into the directory.
        limits: Resource limits; `SandboxLimits()` when omitted.

    Returns:
        A `SandboxResult`; failures to start are in `.error`, never raised.
    """
    limits = limits or SandboxLimits()
    with _CONCURRENCY:
        return _run(args, files, limits)


def _run(args: list[str], files: dict[str, str], limits: SandboxLimits) -> SandboxResult:
    is_root = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="rubric-sandbox-"))
    try:
        root.chmod(0o755)
        workdir = root / "work"
        site_dir = root / "site"
        workdir.mkdir(mode=0o700)
        site_dir.mkdir(mode=0o755)
        (workdir / "tmp").mkdir(mode=0o700)
        (site_dir / "sitecustomize.py").write_text(
            _SITECUSTOMIZE.replace("__ROOT__", repr(str(workdir.resolve()))).replace(
                "__SITE__", repr(str(site_dir))
            ),
            encoding="utf-8",
        )
        (site_dir / "sitecustomize.py").chmod(0o644)
        for name, text in files.items():
            target = (workdir / name).resolve()
            if not str(target).startswith(str(workdir.resolve()) + os.sep):
                msg = f"sandbox file name {name!r} points outside the sandbox directory"
                raise ValueError(msg)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

        isolation: list[str] = []
        uid: int | None = None
        owns_uid = False
        reveal: dict[str, list[str]] = {}
        if is_root:
            uid, owns_uid = _pick_uid()
            reveal, unfixable = _reveal_plan(_needed_paths())
            if unfixable:
                return SandboxResult(
                    returncode=None,
                    output="",
                    error=(
                        "cannot run untrusted code as an unprivileged user: the interpreter "
                        f"path {unfixable[0]} is not readable by other users; refusing to "
                        "run it as root"
                    ),
                )
            for path in (workdir, workdir / "tmp", *workdir.rglob("*")):
                os.chown(path, uid, uid)
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
        env = {
            "PATH": _SAFE_PATH,
            "HOME": str(workdir),
            "TMPDIR": str(workdir / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "PYTHONPATH": str(site_dir),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONIOENCODING": "utf-8",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "COLUMNS": "200",
        }
        status_read, status_write = os.pipe()
        config = {
            "status_fd": status_write,
            "namespaces": is_root and not os.environ.get("RUBRIC_SANDBOX_NO_NAMESPACES"),
            "clone_flags": _CLONE_NEWNET | _CLONE_NEWNS,
            "reveal": reveal,
            "keep": _kept_in_private_tmp(str(root.resolve())),
            "private_tmp": list(_PRIVATE_TMP),
            "rlimits": rlimits,
            "uid": uid,
            "gid": uid,
            "workdir": str(workdir),
            "argv": [sys.executable, *args],
            "env": env,
        }
        log_path = root / "output.log"
        started = time.monotonic()
        with log_path.open("wb") as log:
            try:
                process = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, json.dumps(config)],
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
        timed_out = False
        try:
            returncode = process.wait(
                timeout=max(0.1, limits.wall_s - (time.monotonic() - started))
            )
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process.pid)
            returncode = process.wait()
        duration = time.monotonic() - started
        # Background children left behind (in the group, or escaped with setsid).
        _kill_group(process.pid)
        leftovers = kill_uid(uid) if (uid is not None and owns_uid) else 0
        isolation.append(
            f"limits: cpu {limits.cpu_s}s, memory {limits.memory_bytes >> 20} MiB, "
            f"{limits.nproc} processes, files {limits.fsize_bytes >> 20} MiB, wall {limits.wall_s:g}s"
        )
        error = (
            None if status.get("ok", False) else status.get("error", "the sandbox did not start")
        )
        return SandboxResult(
            returncode=returncode,
            output=_tail(log_path, limits.output_chars),
            timed_out=timed_out,
            duration_s=duration,
            isolation=isolation,
            error=error,
            uid=uid,
            leftover_killed=leftovers,
            output_bytes=log_path.stat().st_size,
        )
    finally:
        _rmtree(root)
