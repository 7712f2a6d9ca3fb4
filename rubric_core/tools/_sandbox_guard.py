"""The sandbox's Python-level tripwire, installed as `sitecustomize` inside it."""

from __future__ import annotations

# A tripwire inside Python itself that refuses network sockets, writes outside the test
# directory, other processes' environments, shell commands and ctypes. It is not the
# fence: one line of the sandboxed code can switch it off. Bubblewrap's namespaces and
# mounts and the resource limits (sandbox.py) are what hold; this only makes the common
# mistakes fail early with a clear message.
SITECUSTOMIZE = r'''
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
