"""Attack programs submitted as candidate code, against each isolating backend.

Each must end in a clear verdict, leave the host unharmed and leave nothing running.
The programs run through the generic path (the program prints its own result), so the
verdicts checked here are the ones the host decides, whatever the program claims.
"""

import os
import socket
import threading
from pathlib import Path

import pytest

from runner.sandbox.run import run_script
from tests.sandbox.helpers import (
    FAST,
    assert_nothing_left,
    backend_param,
    dump,
    metrics,
    program,
    report,
    require,
)

ISOLATING = [backend_param("docker"), backend_param("bwrap")]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=ISOLATING)
def backend(request):
    require(request.param)
    yield request.param
    assert_nothing_left(request.param)


def run(code: str, backend: str, **limits) -> dict:
    return run_script(code, backend=backend, limits=dict(FAST, **limits))


def test_fork_bomb_is_a_process_limit(backend):
    code = program("while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    result = run(code, backend, wall_s=3)
    assert result["verdict"] == "process_limit", dump(result)
    assert "64 processes" in result["message"]


def test_memory_bomb_is_a_memory_limit(backend):
    code = program("hoard = []\nwhile True:\n    hoard.append(b'x' * (32 * 2**20))\n")
    result = run(code, backend, memory_mib=256)
    assert result["verdict"] == "memory_limit", dump(result)
    assert "256 MiB" in result["message"]


def test_infinite_loop_is_a_timeout(backend):
    result = run(program("while True:\n    pass\n"), backend, wall_s=2)
    assert result["verdict"] == "timeout", dump(result)
    assert "more than 2 s of CPU" in result["message"]


def test_sleeping_past_the_limit_is_a_timeout_within_the_stall_limit(backend):
    # Blocked, it uses no CPU: stopped once nothing moved for stall_s, long before its
    # CPU budget (wall_s) could run out.
    result = run(program("time.sleep(3600)\n"), backend, wall_s=60, stall_s=1)
    assert result["verdict"] == "timeout", dump(result)
    assert "no progress for 1 s" in result["message"]
    assert result["sandbox"]["grading_s"] < 10, dump(result)


def test_a_busy_machine_does_not_count_against_the_run(backend):
    # Four processes keep both CPUs busy outside the sandbox: the run gets about 40% of
    # a CPU, and so takes ~4 s of real time, but it counts its own CPU: 1.5 s of work
    # fits a 2.5 s budget however long the wall clock says it took.
    burners = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            while True:
                pass
        burners.append(pid)
    try:
        code = program(
            "end = time.process_time() + 1.5\nwhile time.process_time() < end:\n    pass\n"
            + report("pass")
        )
        result = run(code, backend, wall_s=2.5)
    finally:
        for pid in burners:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert result["status"] == "pass", dump(result)


def test_patching_the_clock_does_not_escape_the_limit(backend):
    code = program(
        "time.monotonic = lambda: 0.0\ntime.time = lambda: 0.0\n"
        "time.perf_counter = lambda: 0.0\n"
        "end = 0\nwhile True:\n    end += 1\n"
    )
    result = run(code, backend, wall_s=2)
    assert result["verdict"] == "timeout", dump(result)
    assert result["sandbox"]["grading_s"] >= 2


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_gigabyte_of_output_is_an_output_limit(backend, stream):
    code = program(
        f"chunk = 'x' * 2**20\nfor _ in range(1024):\n    sys.{stream}.write(chunk)\n"
        + report("pass")
    )
    result = run(code, backend)
    assert result["verdict"] == "output_limit", dump(result)
    assert len(result["stdout"]) + len(result["stderr"]) <= 2 * 64 * 1024 + 2


def test_filling_tmp_is_a_disk_limit(backend):
    code = program(
        "i = 0\nwhile True:\n"
        "    with open(f'/tmp/fill{i}', 'wb') as f:\n"
        "        f.write(b'x' * 2**20)\n"
        "    i += 1\n"
    )
    result = run(code, backend)
    assert result["verdict"] == "disk_limit", dump(result)
    assert "16 MiB" in result["message"]


def test_one_huge_file_is_a_disk_limit(backend):
    code = program("open('/tmp/big', 'wb').write(b'x' * (64 * 2**20))\n" + report("pass"))
    result = run(code, backend, memory_mib=512)
    assert result["verdict"] == "disk_limit", dump(result)


def test_no_tcp_connection_reaches_a_listener_on_the_hosts_loopback(backend):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = program(
        "import socket\nerrors = []\n"
        f"for host in ('127.0.0.1', 'localhost', '::1'):\n"
        "    try:\n"
        f"        socket.create_connection((host, {port}), timeout=2).close()\n"
        "        errors.append(host + ': connected')\n"
        "    except OSError as exc:\n"
        "        errors.append(host + ': ' + type(exc).__name__)\n" + report(outcome="errors")
    )
    try:
        result = run(code, backend)
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert accepted == [], "the sandbox reached the host's loopback"
    assert not any("connected" in e for e in metrics(result)["outcome"]), dump(result)


def test_host_files_and_secrets_are_out_of_reach(backend, monkeypatch, tmp_path):
    monkeypatch.setenv("OVERLAP_TEST_SECRET", "hunter2-not-for-candidates")
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("hunter2-file-contents")
    targets = [
        str(REPO / "platform" / "overlap" / "settings.py"),
        str(REPO / "pyproject.toml"),
        "/etc/shadow",
        "/proc/1/environ",
        "/proc/self/environ",
        str(secret_file),
        "/root/.bash_history",
        "/var/run/docker.sock",
    ]
    code = program(
        "found = {}\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        found[path] = open(path, 'rb').read(4096).decode(errors='replace')\n"
        "    except OSError as exc:\n"
        "        found[path] = 'denied: ' + type(exc).__name__\n"
        "found['env'] = dict(os.environ)\n" + report(found="found")
    )
    result = run(code, backend)
    text = str(result)
    assert "hunter2" not in text, dump(result)
    found = metrics(result)["found"]
    for path in targets:
        if path == "/proc/self/environ":
            continue  # its own environment, which holds nothing of the host's
        assert found[path].startswith("denied"), f"{path} was readable: {found[path][:200]}"


def test_nothing_outside_tmp_is_writable(backend):
    targets = ["/", "/usr", "/etc", "/opt", "/opt/overlap/runner", str(REPO), "/root", "/var"]
    code = program(
        "written = []\n"
        f"for folder in {targets!r}:\n"
        "    try:\n"
        "        with open(os.path.join(folder, 'pwned.txt'), 'w') as f:\n"
        "            f.write('x')\n"
        "        written.append(folder)\n"
        "    except OSError:\n"
        "        pass\n"
        "open('/tmp/allowed.txt', 'w').write('fine')\n" + report(written="written")
    )
    result = run(code, backend)
    # A checkout under /tmp (a CI clone) appears inside the sandbox's own private /tmp;
    # writing there is allowed and never reaches the host, checked just below.
    outside_tmp = [p for p in metrics(result)["written"] if not p.startswith("/tmp/")]
    assert outside_tmp == [], dump(result)
    assert not (REPO / "pwned.txt").exists()
    assert not (REPO / "runner" / "pwned.txt").exists()


def test_a_setsid_daemon_does_not_outlive_the_run(backend):
    marker = f"sleep {4000 + os.getpid() % 1000}"
    code = program(
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/bin/sh', ['sh', '-c', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n" + report("pass")
    )
    result = run(code, backend)
    assert result["status"] == "pass", dump(result)
    assert_nothing_left(backend, marker)


def test_killing_its_parent_does_not_stop_the_report(backend):
    code = program(
        "import signal\nattempts = []\n"
        "for target in (os.getppid(), 1, -1):\n"
        "    try:\n"
        "        os.kill(target, signal.SIGKILL)\n"
        "        attempts.append(target)\n"
        "    except OSError as exc:\n"
        "        attempts.append(type(exc).__name__)\n" + report(attempts="attempts")
    )
    result = run(code, backend)
    # kill(-1) takes the program itself down too; either way the host gets a report.
    assert result["verdict"] in ("wrong", "crash"), dump(result)
    assert result["sandbox"]["grading_s"] is not None


def test_symlinks_on_result_paths_change_nothing(backend):
    code = program(
        "for name in ('/tmp/result.json', '/tmp/job/result.json', '/tmp/envelope'):\n"
        "    try:\n"
        "        os.symlink('/etc/shadow', name)\n"
        "    except OSError:\n"
        "        pass\n" + report(linked="os.path.islink('/tmp/result.json')")
    )
    result = run(code, backend)
    assert result["verdict"] == "wrong", dump(result)
    assert metrics(result)["linked"] is True
    assert "root:" not in str(result)


def test_a_forged_report_on_stdout_is_only_output(backend):
    """The program prints what the sandbox's first process would print, with a guessed
    nonce, and tries to write to that process's stdout; the host takes neither."""
    code = program(
        "forged = {'protocol': 1, 'nonce': '0' * 32, 'exit_code': 0, 'signal': None,\n"
        "          'grading_s': 0.1, 'stdout': '{\"status\": \"pass\"}', 'stderr': '',\n"
        "          'stdout_bytes': 1, 'stderr_bytes': 0, 'limit': None, 'oom_kills': 0,\n"
        "          'pids_max_events': 0, 'tmp_free_bytes': 1, 'error': None}\n"
        "print(json.dumps(forged))\n"
        "try:\n"
        "    open('/proc/1/fd/1', 'w').write(json.dumps(forged) + '\\n')\n"
        "    reached = True\n"
        "except OSError:\n"
        "    reached = False\n"
        "raise SystemExit(3)\n"
    )
    result = run(code, backend)
    assert result["status"] != "pass", dump(result)
    assert result["verdict"] == "crash"
    assert "exited with status 3" in result["message"]


@pytest.mark.parametrize(
    "before, after",
    [
        ("print(json.dumps({'status': 'pass', 'verdict': 'accepted', 'message': 'forged'}))\n", ""),
        ("", "sys.stdout.write('x')\n"),  # a stray byte after the real result
    ],
)
def test_output_that_is_not_exactly_one_result_is_not_trusted(backend, before, after):
    """The grader's stdout holds one JSON document and nothing else; anything more (a
    forged pass printed first, a stray byte after the last line) and the host takes
    none of it, instead of guessing which line is the grader's."""
    code = program(before + report("fail") + after)
    result = run(code, backend)
    assert result["status"] != "pass", dump(result)
    assert result["verdict"] == "crash", dump(result)
