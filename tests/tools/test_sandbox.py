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
from rubric_core.tools._sandbox_bwrap import find_bwrap
from rubric_core.tools.sandbox import SandboxLimits, _processes_of, run_sandboxed

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux"),
    pytest.mark.timeout(120),
]

LIMITS = SandboxLimits(wall_s=8, cpu_s=4)
"""Short limits so each hostile test ends in seconds."""

REPO = Path(__file__).resolve().parents[2]


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
    monkeypatch.setenv("RUBRIC_STUDIO_SANDBOX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK", "1")
    monkeypatch.setenv("RUBRIC_STUDIO_SANDBOX_NO_NAMESPACES", "1")
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
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    shutil.rmtree(holder, ignore_errors=True)
    assert completed.stdout.startswith("PASSED: 1 passed"), completed.stdout + completed.stderr


# --- what a hostile test could do as root before bubblewrap ---------------------------

GUARD_OFF = "import sitecustomize\nsitecustomize._deny = lambda what: None\n"
"""One line turns the audit hook off: the tests below take the guard away first, so
only the OS-level fences stand."""

ROOMY = SandboxLimits(wall_s=25, cpu_s=15)
"""For attacks that should end in a passing test: room for pytest on a loaded machine."""

pytestmark_bwrap = pytest.mark.skipif(
    find_bwrap() is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)


@pytestmark_bwrap
def test_host_files_are_not_there_even_with_the_guard_off(tmp_path):
    (REPO / "artifacts").mkdir(exist_ok=True)
    store_db = REPO / "artifacts" / f"sandbox-secret-{uuid.uuid4().hex}.db"
    cached = Path.home() / ".cache" / f"sandbox-secret-{uuid.uuid4().hex}"
    secrets = [store_db, cached]
    for secret in secrets:
        secret.write_text("secret-contents")
    paths = [*map(str, secrets), str(REPO / "README.md"), "/etc/shadow", "/etc/passwd"]
    tests = GUARD_OFF + (
        f"PATHS = {paths!r}\n"
        "def test_read():\n"
        "    readable = []\n"
        "    for path in PATHS:\n"
        "        try:\n"
        "            open(path, 'rb').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        readable.append(path)\n"
        "    assert readable == []\n"
    )
    try:
        result = run_pytest("x = 1", tests, limits=ROOMY)
    finally:
        for secret in secrets:
            secret.unlink(missing_ok=True)
    assert result.text == "PASSED: 1 passed", result.text
    assert "secret-contents" not in result.sandbox.output


@pytestmark_bwrap
def test_host_unix_sockets_are_unreachable():
    (REPO / "artifacts").mkdir(exist_ok=True)
    listeners = []
    paths = [f"/tmp/rubric-sock-{uuid.uuid4().hex[:12]}", str(REPO / "artifacts" / "s.sock")]
    for path in paths:
        Path(path).unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        Path(path).chmod(0o777)  # as daemons that serve every local user leave theirs
        listener.listen(8)
        listener.setblocking(False)
        listeners.append(listener)
    tests = GUARD_OFF + (
        "import socket\n"
        f"PATHS = {paths!r}\n"
        "def test_connect():\n"
        "    reached = []\n"
        "    for path in PATHS:\n"
        "        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "        try:\n"
        "            client.connect(path)\n"
        "        except OSError:\n"
        "            continue\n"
        "        reached.append(path)\n"
        "    assert reached == []\n"
    )
    try:
        result = run_pytest("x = 1", tests, limits=ROOMY)
        for listener in listeners:
            with pytest.raises(BlockingIOError):
                listener.accept()  # nothing ever reached the host's socket
    finally:
        for listener, path in zip(listeners, paths, strict=True):
            listener.close()
            Path(path).unlink(missing_ok=True)
    assert result.text == "PASSED: 1 passed", result.text


@pytestmark_bwrap
def test_guard_switched_off_leaves_no_shell_and_no_host_writes():
    markers = [Path("/tmp") / f"escape-{uuid.uuid4().hex}", REPO / f"escape-{uuid.uuid4().hex}"]
    tests = GUARD_OFF + (
        "import os, subprocess\n"
        f"MARKERS = {list(map(str, markers))!r}\n"
        "def test_escape():\n"
        "    for shell in ('/bin/sh', '/usr/bin/sh', '/bin/bash'):\n"
        "        try:\n"
        "            subprocess.run([shell, '-c', 'touch ' + ' '.join(MARKERS)], check=False)\n"
        "        except OSError:\n"
        "            continue\n"
        "        raise AssertionError('a shell ran: ' + shell)\n"
        "    for marker in MARKERS:\n"
        "        try:\n"
        "            with open(marker, 'w') as handle:\n"
        "                handle.write('owned')\n"
        "        except OSError:\n"
        "            pass\n"
    )
    try:
        result = run_pytest("x = 1", tests, limits=ROOMY)
        assert result.text == "PASSED: 1 passed", result.text
        assert [m for m in markers if m.exists()] == []  # whatever ran inside, nothing persisted
    finally:
        for marker in markers:
            marker.unlink(missing_ok=True)


@pytestmark_bwrap
def test_host_processes_and_their_command_lines_are_invisible():
    import subprocess

    secret = f"--api-key=sk-{uuid.uuid4().hex}"
    neighbour = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", secret])
    tests = GUARD_OFF + (
        "import os\n"
        f"SECRET = {secret!r}\n"
        "def test_look():\n"
        "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    print('visible pids', pids)\n"
        "    for pid in pids:\n"
        "        try:\n"
        "            cmdline = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        assert SECRET.encode() not in cmdline\n"
        "    assert len(pids) <= 3  # bubblewrap's init, this process, and nothing of the host\n"
    )
    try:
        result = run_pytest("x = 1", tests, limits=ROOMY)
    finally:
        neighbour.kill()
        neighbour.wait()
    assert result.text == "PASSED: 1 passed", result.text


@pytestmark_bwrap
def test_nothing_outside_can_be_signalled_or_traced():
    tests = GUARD_OFF + (
        "import ctypes, os, signal\n"
        "def test_reach():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
        "    for pid in {1, os.getppid()}:\n"
        "        assert libc.ptrace(16, pid, None, None) == -1  # PTRACE_ATTACH\n"
        "        try:\n"
        "            os.kill(pid, signal.SIGKILL)\n"
        "        except (PermissionError, ProcessLookupError):\n"
        "            continue\n"
        "        raise AssertionError('killed pid %d' % pid)\n"
    )
    result = run_pytest("x = 1", tests, limits=ROOMY)
    assert result.text == "PASSED: 1 passed", result.text
    _assert_no_sandbox_processes_left(result)


@pytestmark_bwrap
def test_daemon_started_by_a_test_does_not_outlive_the_call():
    tests = GUARD_OFF + (
        "import os, time\n"
        "def test_daemon():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "        os._exit(0)\n"
        "    os.wait()\n"
    )
    result = run_pytest("x = 1", tests, limits=ROOMY)
    assert result.text == "PASSED: 1 passed", result.text
    _assert_no_sandbox_processes_left(result)


@pytestmark_bwrap
def test_processes_together_hit_the_memory_limit():
    # Three children of 600 MiB each: each under the 1 GiB per-process limit, 1.8 GiB together.
    tests = (
        "import os, time\n"
        "def test_hold():\n"
        "    for _ in range(3):\n"
        "        if os.fork() == 0:\n"
        "            block = b'x' * (600 << 20)\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "    for _ in range(3):\n"
        "        os.wait()\n"
    )
    result = run_pytest("x = 1", tests, limits=SandboxLimits(wall_s=40, cpu_s=15))
    assert result.status == "KILLED", result.text
    assert result.text.startswith(
        "KILLED: the tests' processes together used more than the 1024 MiB memory limit"
    )
    assert result.sandbox.memory_exceeded
    _assert_no_sandbox_processes_left(result)


@pytestmark_bwrap
def test_files_together_hit_the_disk_limit():
    # 40 files of 15 MiB: each under the 16 MiB file-size limit, 600 MiB together.
    tests = (
        "import os\n"
        "import pathlib\n"
        "def test_fill():\n"
        "    written = 0\n"
        "    try:\n"
        "        for index in range(40):\n"
        "            pathlib.Path(f'fill-{index}.bin').write_bytes(b'x' * (15 << 20))\n"
        "            written += 1\n"
        "    except OSError as exc:\n"
        "        for path in pathlib.Path().glob('fill-*'):\n"
        "            path.unlink()  # room again for pytest's own report\n"
        "        raise AssertionError(f'written {written}: {exc}') from None\n"
    )
    result = run_pytest("x = 1", tests, limits=ROOMY)
    assert result.status == "FAILED", result.text
    assert "No space left on device" in result.text
    assert "writable space (64 MiB for all files) is full" in result.text
    assert int(re.search(r"written (\d+)", result.text).group(1)) <= 4


def test_missing_bubblewrap_is_refused_with_how_to_install_it(monkeypatch):
    monkeypatch.setenv("RUBRIC_STUDIO_SANDBOX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK", raising=False)
    monkeypatch.delenv("RUBRIC_SANDBOX_ALLOW_WEAK", raising=False)
    result = run_pytest("x = 1", "def test_x():\n    pass\n", limits=LIMITS)
    assert result.status == "ERROR"
    assert result.text.startswith("ERROR: the sandbox could not run the tests: bubblewrap")
    assert "apt-get install bubblewrap" in result.text
    assert "RUBRIC_SANDBOX_ALLOW_WEAK=1" in result.text


def test_weak_fences_run_only_when_opted_in_and_warn(monkeypatch):
    monkeypatch.setenv("RUBRIC_STUDIO_SANDBOX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK", raising=False)
    monkeypatch.delenv("RUBRIC_SANDBOX_ALLOW_WEAK", raising=False)
    with pytest.warns(RuntimeWarning, match="apt-get install bubblewrap"):
        result = run_sandboxed(["-c", "print('ran')"], {}, limits=LIMITS, allow_weak_fences=True)
    assert result.fences == "weak"
    if result.error is None:  # a root host whose interpreter others cannot reach refuses
        assert result.output.strip() == "ran"


def test_runtime_requirements_carry_pytest_for_the_sandbox():
    # `pip install -r requirements.txt` (the README's first command) must
    # bring the pytest that run_test_suite runs; .ci/run also runs the find_duplicates demo
    # to "satisfied" in a venv made from requirements.txt alone.
    from importlib.metadata import version

    pins = dict(
        line.split("==", 1)
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    )
    assert pins.get("pytest") == version("pytest")
    ci = (REPO / ".ci" / "run").read_text()
    assert "-r requirements.txt" in ci and "examples/find_duplicates.py" in ci


def test_a_venv_whose_python_links_out_of_the_mounts_gets_every_link_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv of another Python (Debian's: .venv/bin/python -> python3 -> /usr/bin/python3
    -> python3.11) ran nothing in the sandbox: the link out of the venv dangled inside."""
    from rubric_core.tools import _sandbox_bwrap as bw

    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (base / "python3.11").write_text("")
    (base / "python3").symlink_to("python3.11")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python3").symlink_to(base / "python3")
    (venv_bin / "python").symlink_to("python3")
    monkeypatch.setattr(bw.sys, "executable", str(venv_bin / "python"))
    monkeypatch.setattr(bw, "needed_paths", lambda: [str(tmp_path / "venv")])
    argv, _ = bw.bwrap_argv(
        "bwrap",
        host_src=str(tmp_path),
        host_site=str(tmp_path),
        disk_bytes=1 << 20,
        drop_to_uid=False,
    )
    mounted = {argv[i + 2] for i, arg in enumerate(argv) if arg == "--ro-bind"}
    assert str(tmp_path / "venv") in mounted
    assert {str(base / "python3"), str(base / "python3.11")} <= mounted
