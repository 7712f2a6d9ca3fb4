"""The bubblewrap command line of the sandbox and the bootstrap it runs first."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from rubric_core import config
from rubric_core.tools._sandbox_exec import BOOTSTRAP_EXEC

BWRAP_ENV = "RUBRIC_STUDIO_SANDBOX_BWRAP"
"""Names the bubblewrap binary to use (default: `bwrap` on PATH, /usr/bin, /usr/local/bin);
the older `RUBRIC_SANDBOX_BWRAP` still works, with a `DeprecationWarning`."""

INSTALL_HINT = "apt-get install bubblewrap"

SANDBOX_DIR = "/sandbox"
"""Inside the sandbox: the size-limited tmpfs, the only place the code may write."""

WORKDIR = f"{SANDBOX_DIR}/work"
TMPDIR = f"{SANDBOX_DIR}/tmp"
SRC_DIR = "/run/rubric/src"
"""Inside: the test's own files, read-only; the bootstrap copies them into WORKDIR."""
SITE_DIR = "/run/rubric/site"
"""Inside: the guard's `sitecustomize`, read-only."""

_SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")
"""Shared libraries the interpreter and its extension modules load. /usr/bin, /bin and
/sbin stay out: there is no shell or other program to run inside."""

_SYSTEM_PREFIXES = frozenset({"/", "/usr", "/usr/local"})

_ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")

# Runs inside bubblewrap's namespaces, before the untrusted code, as root when the host
# is root (with only CAP_SETUID, CAP_SETGID and CAP_CHOWN left): it copies the files
# into the tmpfs, sets the resource limits, drops to the run's fresh uid and then,
# unprivileged, enters a user namespace of its own (so the process limit counts per
# run and the code holds no capability anywhere), then execs the command. Bubblewrap
# cannot do the drop itself: run as root, its user namespace maps to host uid 0, which
# RLIMIT_NPROC does not apply to.
BOOTSTRAP = (
    r"""
import ctypes, json, os, resource, shutil, sys
cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
notes = []
def report(extra):
    os.write(status_fd, json.dumps(dict(extra, notes=notes)).encode())
    os.close(status_fd)
try:
    shutil.copytree(cfg["src"], cfg["workdir"])
    os.mkdir(cfg["tmpdir"], 0o700)
    uid = cfg["uid"]
    if uid is not None:
        for top, dirs, files in os.walk(cfg["sandbox"]):
            for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
                os.chown(name, uid, uid)
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: let this uid write its own maps
        if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
            raise OSError(ctypes.get_errno(), "user namespace: " + os.strerror(ctypes.get_errno()))
        for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)), ("gid_map", "%d %d 1" % (uid, uid))):
            with open("/proc/self/" + name, "w") as handle:
                handle.write(text)
        notes.append("uid %d in a user namespace of its own" % uid)
"""
    + BOOTSTRAP_EXEC
)


def find_bwrap() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    named = config.text(BWRAP_ENV)
    if named:
        return named if os.access(named, os.X_OK) else None
    return shutil.which("bwrap") or shutil.which(
        "bwrap", path="/usr/bin:/bin:/usr/local/bin:/usr/sbin"
    )


def needed_paths() -> list[str]:
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


def _symlink_chain(path: str) -> list[str]:
    """`path` and each absolute path its symlinks lead through, to the file itself.

    Examples:
        >>> _symlink_chain("/nonexistent/python")
        ['/nonexistent/python']
    """
    chain = [path]
    for _ in range(40):  # the kernel's own limit on links followed
        if not os.path.islink(chain[-1]):
            break
        target = os.readlink(chain[-1])
        step = os.path.normpath(os.path.join(os.path.dirname(chain[-1]), target))
        if step in chain:
            break
        chain.append(step)
    return chain


def _outermost(paths: list[str]) -> list[str]:
    unique = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
    return [
        p for p in unique if not any(p.startswith(q.rstrip("/") + "/") for q in unique if q != p)
    ]


def bwrap_argv(
    bwrap: str, *, host_src: str, host_site: str, disk_bytes: int, drop_to_uid: bool
) -> tuple[list[str], list[str]]:
    """The bubblewrap command (up to `--`) and the isolation notes it stands for.

    Mounted: the interpreter's own directories and the system's shared libraries,
    read-only; the test's files read-only at SRC_DIR; a tmpfs of `disk_bytes` at
    SANDBOX_DIR, the only writable place (/tmp points into it); a fresh /proc of the
    new PID namespace and a minimal /dev. Nothing else of the host exists inside.
    """
    # A system interpreter's prefix is /usr (or /usr/local): mounting it whole would bring
    # /usr/bin and its shell along; its executable, standard library and site-packages
    # (needed_paths lists them) are enough.
    python_dirs = [p for p in needed_paths() if os.path.realpath(p) not in _SYSTEM_PREFIXES]
    binds: list[tuple[str, str]] = [(p, p) for p in _outermost(python_dirs)]
    for step in _symlink_chain(sys.executable):
        # A venv's python links to its base interpreter (e.g. a venv of Debian's Python:
        # .venv/bin/python3 -> /usr/bin/python3 -> python3.11): every step outside what
        # is mounted is mounted as the file it leads to, or the link dangles inside.
        if not any(step.startswith(b.rstrip("/") + "/") or step == b for b, _ in binds):
            binds.append((step, step))
    links: list[tuple[str, str]] = []
    for lib in _SYSTEM_LIBS:
        if os.path.islink(lib):
            links.append((os.readlink(lib), lib))
        elif os.path.isdir(lib) and not any(lib.startswith(b + "/") or lib == b for b, _ in binds):
            binds = [(b, d) for b, d in binds if not b.startswith(lib + "/")]  # inside it
            binds.append((lib, lib))
    binds.extend((f, f) for f in _ETC_FILES if os.path.isfile(f))
    binds.extend([(host_src, SRC_DIR), (host_site, SITE_DIR)])
    targets = {dest for _, dest in binds}
    parents: set[str] = set()
    for dest in [*targets, *(link for _, link in links), SANDBOX_DIR]:
        parent = os.path.dirname(dest)
        while parent not in ("/", ""):
            parents.add(parent)
            parent = os.path.dirname(parent)
    # bubblewrap would give a missing parent the mode of the host's (0700 for /root):
    # each is made 0755 first so the unprivileged uid can walk to what is mounted.
    argv = [bwrap]
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if drop_to_uid:
        # root host: the bootstrap needs these three to hand the tmpfs to the fresh uid and
        # drop to it; the uid drop clears them, and the user namespace comes after it.
        argv += ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN"):
            argv += ["--cap-add", cap]
    else:
        argv.append("--unshare-user")
    for parent in sorted(parents - targets, key=lambda p: (p.count("/"), p)):
        argv += ["--perms", "0755", "--dir", parent]
    for source, dest in binds:
        argv += ["--ro-bind", source, dest]
    for target, link in links:
        argv += ["--symlink", target, link]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(int(disk_bytes)), "--perms", "0755", "--tmpfs", SANDBOX_DIR]
    if not any(dest.startswith("/tmp/") for dest in targets):
        argv += ["--symlink", TMPDIR, "/tmp"]
    argv += ["--chdir", "/"]
    notes = [
        "bubblewrap: new user, PID, mount, network, IPC and UTS namespaces",
        "network namespace (loopback only)",
        "mounted read-only: " + ", ".join(sorted({*(d for _, d in binds[:-2])})),
        f"writable: a {int(disk_bytes) >> 20} MiB tmpfs at {SANDBOX_DIR}",
    ]
    return argv, notes
