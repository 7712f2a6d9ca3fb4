"""The files a code check names (`{json: schemas/person.json}`, `{pytest: tests/t.py}`).

They are read from inside the check directory only (the middleware's `check_dir`, the
working directory by default): a path that `..`, an absolute path or a symbolic link
takes out of it is refused, and no error quotes what a file holds, so a rubric cannot
turn a check into a way of reading the host's files.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_check_file"]

_MAX_FILE_CHARS = 200_000
"""Longest test module or schema file a check reads from disk."""


def _inside(arg: str, base_dir: Path, what: str) -> tuple[Path | None, str]:
    """(the file, "") or (None, the error): a check's file resolves inside `base_dir`.

    Symbolic links and `..` are resolved first, so neither leads out of the directory.
    """
    try:
        root = base_dir.resolve()
        path = (root / Path(arg)).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        return None, f"ERROR: cannot resolve the {what} {arg}: {exc.__class__.__name__}"
    if not path.is_relative_to(root):
        return None, (
            f"ERROR: the {what} {arg} is outside the check directory {root}; "
            "check files are read only from inside it (check_dir)"
        )
    return path, ""


def read_check_file(arg: str, base_dir: Path, what: str) -> tuple[str | None, str]:
    """(text, "") or (None, the error) for a file named by a check's argument.

    The error names the file and what is wrong with it, never what it holds.
    """
    path, problem = _inside(arg, base_dir, what)
    if path is None:
        return None, problem
    try:
        if path.exists() and not path.is_file():  # a FIFO or a device would block or never end
            return None, f"ERROR: the {what} {arg} is not a regular file"
        size = path.stat().st_size
        if size > _MAX_FILE_CHARS * 4:
            return (
                None,
                f"ERROR: the {what} {arg} is {size:,} bytes; the limit is {_MAX_FILE_CHARS:,} characters",
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return None, f"ERROR: the {what} {arg} is not UTF-8 text (byte {exc.start:,})"
    except OSError as exc:
        return (
            None,
            f"ERROR: cannot read the {what} {arg}: {exc.strerror or exc.__class__.__name__}",
        )
    if len(text) > _MAX_FILE_CHARS:
        return (
            None,
            f"ERROR: the {what} {arg} is {len(text):,} characters; the limit is {_MAX_FILE_CHARS:,}",
        )
    return text, ""
