"""The end both sandbox bootstraps share: enter the work dir, report, exec the command.

Appended to each bootstrap script (`_sandbox_bwrap.BOOTSTRAP`, `_sandbox_weak.BOOTSTRAP`),
whose last statement is inside a `try:` that this closes: the bootstrap reports its setup
(or its failure, exiting 97) on the status pipe, then replaces itself with the command.
"""

from __future__ import annotations

BOOTSTRAP_EXEC = r"""
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
