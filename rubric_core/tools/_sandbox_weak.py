"""The sandbox's weaker fences, for hosts without bubblewrap (only when opted in).

A fresh uid, new network and mount namespaces made by hand (root hosts), private temp
dirs, rlimits and the audit hook: what `run_test_suite` had before bubblewrap. It leaves
the host's file system readable, host PIDs visible and Unix sockets reachable; sandbox.py
uses it only when bubblewrap is missing and the caller opted in, and warns.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rubric_core.tools._sandbox_exec import BOOTSTRAP_EXEC

CLONE_FLAGS = 0x00020000 | 0x40000000
"""CLONE_NEWNS | CLONE_NEWNET."""

# The bootstrap runs as root (when the host is root) in a fresh, single-threaded
# interpreter: it enters new network and mount namespaces, hides directories the
# unprivileged user cannot reach anyway except for the interpreter's own path, sets
# the resource limits, drops to the sandbox uid and execs the real command. Doing
# this in a child of its own avoids `preexec_fn`, which is unsafe in threaded hosts.
BOOTSTRAP = (
    r"""
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
"""
    + BOOTSTRAP_EXEC
)


def _other_can_traverse(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IXOTH)


def reveal_plan(paths: list[str]) -> tuple[dict[str, list[str]], list[str]]:
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


PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def kept_in_private_tmp(sandbox_root: str, needed: list[str]) -> list[str]:
    """Directories that must stay visible once the temp dirs are replaced: the sandbox's
    own, and the interpreter's when it lives in one (say, a CI venv under /tmp)."""
    candidates = sorted({sandbox_root, *(os.path.realpath(p) for p in needed)})
    under_tmp = [
        p
        for p in candidates
        if any(p.startswith(t + "/") for t in PRIVATE_TMP) and os.path.isdir(p)
    ]
    # a directory inside another kept one comes along with it
    return [p for p in under_tmp if not any(p.startswith(q + "/") for q in under_tmp if q != p)]
