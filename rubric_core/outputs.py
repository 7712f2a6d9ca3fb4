"""Writing to a path the user named: a file replaced atomically, anything else written in place.

Every command that writes a user-named path (`export --output`, `backup DEST`) goes through
here, so they all treat a path the same way:

- `-` is standard output;
- a regular file, a path that does not exist yet, or a symlink to either (the link is
  followed and its target written): written to a temporary file beside the target and
  renamed over it, so a failed write never leaves half a file and the old one stays whole;
- a character or block device, a FIFO or a socket (`/dev/null`, `/dev/stdout`, a named
  pipe): opened and written in place, as `cat > PATH` would; it is never replaced by a
  regular file;
- a directory is refused (`IsADirectoryError`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["STDOUT", "is_stream", "open_output", "output_path", "target_of"]

STDOUT = "-"


def target_of(path: str | os.PathLike[str]) -> Path:
    """The file a write to `path` lands in: symlinks followed (a dangling one to its target).

    >>> str(target_of("-"))
    '-'
    """
    if os.fspath(path) == STDOUT:
        return Path(STDOUT)
    return Path(os.path.realpath(Path(path).expanduser()))


def is_stream(path: str | os.PathLike[str]) -> bool:
    """True when `path` is written in place: `-`, a device, a FIFO or a socket.

    >>> is_stream("-")
    True
    """
    target = target_of(path)
    if str(target) == STDOUT:
        return True
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _refuse_directory(target: Path) -> None:
    if target.is_dir():
        raise IsADirectoryError(21, "is a directory", str(target))


def _new_file_mode(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def _atomic(target: Path, binary: bool, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    mode = _new_file_mode(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    partial = Path(name)
    try:
        fp: IO[Any]
        if binary:
            fp = os.fdopen(fd, "wb")
        else:
            fp = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with fp:
            yield fp
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(partial, mode)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def open_output(
    path: str | os.PathLike[str],
    *,
    binary: bool = False,
    encoding: str = "utf-8",
    newline: str | None = "",
) -> Iterator[IO[Any]]:
    """Open the user-named `path` for writing, by the rules of this module.

    Raises:
        OSError: The path cannot be written (`IsADirectoryError` for a directory).
    """
    target = target_of(path)
    if str(target) == STDOUT:
        stream: IO[Any] = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    _refuse_directory(target)
    if is_stream(target):
        in_place: IO[Any]
        if binary:
            in_place = open(target, "wb")  # noqa: SIM115 - closed below
        else:
            in_place = open(target, "w", encoding=encoding, newline=newline)  # noqa: SIM115
        with in_place:
            yield in_place
        return
    with _atomic(target, binary, encoding, newline) as fp:
        yield fp


@contextlib.contextmanager
def output_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A file to build the output in (for writers that need a path, such as SQLite's
    backup), put in place of `path` by the rules of this module when the block ends.

    For a regular file the built file sits beside the target and is renamed over it;
    for `-`, a device or a FIFO it is built in the temporary folder and then copied into
    the stream. Nothing is put in place if the block raises.
    """
    target = target_of(path)
    if str(target) != STDOUT:
        _refuse_directory(target)
    if is_stream(target):
        with tempfile.TemporaryDirectory(prefix="rubric-output-") as folder:
            built = Path(folder) / "output"
            yield built
            with open_output(target, binary=True) as out, built.open("rb") as src:
                shutil.copyfileobj(src, out)
        return
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(fd)
    built = Path(name)
    built.unlink()  # the name is reserved; the writer creates the file itself
    try:
        yield built
        os.chmod(built, _new_file_mode(target))
        os.replace(built, target)
    finally:
        built.unlink(missing_ok=True)
