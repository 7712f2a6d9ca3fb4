"""User-named output paths (`export --output`, `backup DEST`): a regular file (or a symlink to
one) is replaced atomically; a FIFO (like a device) is written in place; `-` is stdout."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.outputs import is_stream, open_output, output_path
from rubric_core.store import Store


def _seeded(path: Path) -> Path:
    with Store(path) as store:
        store.rubrics.save_version("essay", "- has a title")
    return path


class _Reader:
    """Reads a FIFO to its end on a thread, as `cat PATH` would."""

    def __init__(self, fifo: Path) -> None:
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(fifo,), daemon=True)
        self.thread.start()

    def _read(self, fifo: Path) -> None:
        with fifo.open("rb") as fp:
            self.data = fp.read()

    def result(self) -> bytes:
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.data


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.csv"
    os.mkfifo(path)
    return path


def test_export_to_a_fifo_writes_into_it_and_leaves_it_a_fifo(tmp_path, fifo):
    db = _seeded(tmp_path / "studio.db")
    reader = _Reader(fifo)
    result = CliRunner().invoke(
        cli, ["export", "--dataset", "runs", "--output", str(fifo), "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    assert reader.result().startswith(b"run_id,")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.csv", "studio.db"]


def test_export_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    db = _seeded(tmp_path / "studio.db")
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    result = CliRunner().invoke(
        cli, ["export", "--dataset", "runs", "--output", str(link), "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text().startswith("run_id,")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_a_failed_write_to_a_regular_file_leaves_the_old_one_whole(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), open_output(target) as fp:
        fp.write("half")
        raise RuntimeError("the export failed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_dash_is_standard_output(tmp_path, capsys):
    with open_output("-") as fp:
        fp.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"
    assert is_stream("-") and not is_stream(tmp_path / "new.csv")


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError), open_output(tmp_path):
        pass
    with pytest.raises(IsADirectoryError), output_path(tmp_path):
        pass


def test_backup_to_a_fifo_streams_the_copy_and_leaves_the_fifo(tmp_path, fifo):
    db = _seeded(tmp_path / "studio.db")
    reader = _Reader(fifo)
    result = CliRunner().invoke(cli, ["backup", str(fifo), "--db", str(db)])
    assert result.exit_code == 0, result.output
    data = reader.result()
    assert data.startswith(b"SQLite format 3\x00")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    copy = tmp_path / "copy.db"
    copy.write_bytes(data)
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT name FROM rubrics").fetchall() == [("essay",)]


def test_backup_through_a_symlink_writes_its_target(tmp_path):
    db = _seeded(tmp_path / "studio.db")
    target = tmp_path / "real.db"
    link = tmp_path / "link.db"
    link.symlink_to(target)  # dangling: the target is created
    result = CliRunner().invoke(cli, ["backup", str(link), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT name FROM rubrics").fetchall() == [("essay",)]


def test_backup_to_dash_writes_the_copy_to_stdout(tmp_path):
    db = _seeded(tmp_path / "studio.db")
    result = CliRunner().invoke(cli, ["backup", "-", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.startswith(b"SQLite format 3\x00")
    assert "Backed up" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["studio.db"]
