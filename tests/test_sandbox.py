"""Hostile code given to run_test_suite: each attack is stopped or refused, the host unharmed."""

from __future__ import annotations

import os
import re
import socket
import sys
import uuid
from pathlib import Path

import pytest

from rubric_core.tools import run_pytest
from rubric_core.tools.sandbox import SandboxLimits, _processes_of, run_sandboxed

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux"),
    pytest.mark.timeout(120),
]

LIMITS = SandboxLimits(wall_s=8, cpu_s=4)
"""Short limits so each hostile test ends in seconds."""

REPO = Path(__file__).resolve().parent.parent


def _assert_no_sandbox_processes_left(result) -> None:
    sandbox = result.sandbox
    assert sandbox is not None
    if sandbox.uid is not None:
        assert _processes_of(sandbox.uid) == []


def test_infinite_loop_is_stopped():
    result = run_pytest(
        "def spin():\n    while True:\n        pass\n",
        "def test_spin():\n    spin()\n",
        limits=LIMITS,
    )
    assert result.status in ("KILLED", "TIMEOUT")
    assert re.match(r"(KILLED: CPU time limit of 4s exceeded|TIMEOUT after 8s)", result.text)
    _assert_no_sandbox_processes_left(result)


def test_blocking_sleep_hits_the_wall_clock_timeout():
    result = run_pytest("import time\n", "def test_sleep():\n    time.sleep(600)\n", limits=LIMITS)
    assert result.status == "TIMEOUT"
    assert result.text.startswith("TIMEOUT after 8s")
    assert "process group was killed" in result.text
    _assert_no_sandbox_processes_left(result)


def test_fork_storm_is_capped_by_the_process_limit():
    # The test caps itself at 2000 sleeping children, so a broken sandbox cannot take the
    # machine down; the sandbox must stop it far earlier.
    tests = (
        "import os, time\n"
        "def test_storm():\n"
        "    started = 0\n"
        "    try:\n"
        "        for _ in range(2000):\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(20)\n"
        "                os._exit(0)\n"
        "            started += 1\n"
        "    finally:\n"
        "        print('started', started)\n"
    )
    result = run_pytest("x = 1", tests, limits=LIMITS)
    assert result.status == "FAILED"
    assert "BlockingIOError" in result.text
    assert "process limit (64) stopped new processes" in result.text
    started = int(re.search(r"started (\d+)", result.text).group(1))
    assert started < 100
    _assert_no_sandbox_processes_left(result)


def test_huge_allocation_hits_the_memory_limit():
    result = run_pytest(
        "x = 1", "def test_alloc():\n    block = bytearray(10 * 1024**3)\n", limits=LIMITS
    )
    assert result.status in ("FAILED", "KILLED")
    assert "MemoryError" in result.text or "memory limit" in result.text
    assert "1024 MiB memory limit" in result.text


def test_parent_secrets_are_not_visible(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test")
    tests = (
        "import os\n"
        "def test_env():\n"
        "    print(sorted(os.environ))\n"
        "    assert 'OPENAI_API_KEY' not in os.environ\n"
        "    assert 'sk-secret-test' not in repr(os.environ)\n"
        "    try:\n"
        "        parent = open(f'/proc/{os.getppid()}/environ', 'rb').read()\n"
        "    except OSError:\n"
        "        parent = b''\n"
        "    assert b'sk-secret-test' not in parent\n"
    )
    result = run_pytest("x = 1", tests, limits=LIMITS)
    assert result.text == "PASSED: 1 passed"
    assert "sk-secret-test" not in result.sandbox.output
    assert os.environ["OPENAI_API_KEY"] == "sk-secret-test"  # the host is untouched


@pytest.mark.parametrize("where", ["tmp", "repo"])
def test_writes_outside_the_temp_dir_are_refused(where):
    base = Path("/tmp") if where == "tmp" else REPO
    target = base / f"escape-{uuid.uuid4().hex}"
    tests = f"def test_escape():\n    with open({str(target)!r}, 'w') as handle:\n        handle.write('owned')\n"
    try:
        result = run_pytest("x = 1", tests, limits=LIMITS)
        assert result.status == "FAILED"
        assert "PermissionError" in result.text
        assert "writing outside the test directory is not allowed" in result.text
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_writes_inside_the_temp_dir_work():
    tests = (
        "import tempfile\n"
        "def test_write(tmp_path):\n"
        "    (tmp_path / 'a.txt').write_text('ok')\n"
        "    open('local.txt', 'w').write('ok')\n"
        "    tempfile.NamedTemporaryFile().write(b'ok')\n"
    )
    assert run_pytest("x = 1", tests, limits=LIMITS).text == "PASSED: 1 passed"


def test_loopback_connection_is_refused():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    tests = (
        "import socket\n"
        "def test_connect():\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'hi')\n"
    )
    try:
        result = run_pytest("x = 1", tests, limits=LIMITS)
        assert result.status == "FAILED"
        assert re.search(r"network access is not allowed|Network is unreachable", result.text)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached the listener
    finally:
        listener.close()


def test_shell_commands_are_refused():
    marker = Path("/tmp") / f"escape-shell-{uuid.uuid4().hex}"
    tests = f"import os\ndef test_shell():\n    os.system('touch {marker}')\n"
    result = run_pytest("x = 1", tests, limits=LIMITS)
    assert "shell commands are not allowed" in result.text
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and the uid drop need root")
def test_root_host_runs_code_as_an_unprivileged_uid_without_network():
    result = run_sandboxed(
        [
            "-c",
            "import os, socket; print('uid', os.getuid()); print(socket.if_nameindex())",
        ],
        {},
        limits=LIMITS,
    )
    assert result.error is None
    assert result.uid is not None and result.uid != 0
    assert f"uid {result.uid}" in result.output
    # bubblewrap's fresh network namespace: its own loopback, nothing of the host's
    assert "network namespace (loopback only)" in result.isolation
    assert "[(1, 'lo')]" in result.output
    assert _processes_of(result.uid) == []


def test_sandbox_cleans_up_its_directory(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the host stages files
    result = run_sandboxed(
        ["-c", "import os; print(os.getcwd(), sorted(os.listdir()))"],
        {"a.py": "x = 1"},
        limits=LIMITS,
    )
    assert result.output.strip() == "/sandbox/work ['a.py']"
    assert list(tmp_path.iterdir()) == []  # nothing of the run is left on the host


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hosts drop privileges")
def test_root_host_never_falls_back_to_running_code_as_root(monkeypatch):
    from rubric_core.tools._sandbox_bwrap import needed_paths
    from rubric_core.tools._sandbox_weak import reveal_plan

    # the weak fences (bubblewrap missing, opted in) without their namespaces
    monkeypatch.setenv("RUBRIC_SANDBOX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("RUBRIC_SANDBOX_ALLOW_WEAK", "1")
    monkeypatch.setenv("RUBRIC_SANDBOX_NO_NAMESPACES", "1")
    with pytest.warns(RuntimeWarning, match="weaker fences"):
        result = run_pytest(
            "import os\n", "def test_uid():\n    assert os.getuid() != 0\n", limits=LIMITS
        )
    reveal, _ = reveal_plan(needed_paths())
    if reveal:  # the interpreter sits under a directory only root can enter
        assert result.status == "ERROR"
        assert "refusing to run untrusted code as root" in result.text
    else:
        assert result.text == "PASSED: 1 passed"


def test_interpreter_living_under_tmp_stays_reachable():
    """CI checkouts (and their venvs) may live under /tmp, which the sandbox replaces."""
    import shutil
    import subprocess
    import sysconfig
    import tempfile
    import venv

    # world-readable like a checkout, unlike pytest's own 0700 tmp_path
    holder = Path(tempfile.mkdtemp(prefix="rubric-ci-like-", dir="/tmp"))
    holder.chmod(0o755)
    env_dir = holder / "venv"
    venv.create(env_dir, with_pip=False)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    # the new venv sees this environment's packages (pytest, langchain) through a .pth file
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = (
        "from rubric_core.tools.test_runner import run_pytest\n"
        "print(run_pytest('def add(a, b):\\n    return a + b\\n',"
        " 'def test_add():\\n    assert add(2, 3) == 5\\n').text)\n"
    )
    completed = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    shutil.rmtree(holder, ignore_errors=True)
    assert completed.stdout.startswith("PASSED: 1 passed"), completed.stdout + completed.stderr
