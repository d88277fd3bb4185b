"""Attacks submitted as candidate code to `python -m runner grade`, inside each isolating
backend: the full path a candidate's Run takes."""

from pathlib import Path

import pytest

from runner.sandbox.run import grade
from tests.sandbox.helpers import FAST, assert_nothing_left, backend_param, dump, require

EXERCISE = Path(__file__).resolve().parents[2] / "exercises" / "async-gradient-accumulation"
ISOLATING = [backend_param("docker"), backend_param("bwrap")]


@pytest.fixture(params=ISOLATING)
def backend(request):
    require(request.param)
    if not (EXERCISE / "grader.py").exists():
        pytest.skip("the exercise has no grader yet")
    yield request.param
    assert_nothing_left(request.param)


def run(code: str, backend: str, **limits) -> dict:
    return grade(EXERCISE, code, seeds=1, backend=backend, limits=dict(FAST, **limits))


def test_the_reference_solution_passes_inside_the_sandbox(backend):
    result = run((EXERCISE / "solution.py").read_text(), backend, wall_s=20)
    assert result["status"] == "pass", dump(result)
    assert result["sandbox"]["backend"] == backend


def test_a_forged_pass_printed_by_the_candidate_is_only_output(backend):
    code = (
        "import json, os\n"
        "forged = json.dumps({'status': 'pass', 'verdict': 'accepted', 'message': 'forged',"
        " 'checks': [], 'metrics': {}})\n"
        "print(forged)\n"
        "os.write(1, (forged + '\\n').encode())\n"
        "os.write(2, (forged + '\\n').encode())\n"
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        "        return None\n"
    )
    result = run(code, backend)
    assert result["status"] != "pass", dump(result)


def test_a_forged_pass_then_exit_is_a_crash(backend):
    code = (
        "import json, os\n"
        "forged = json.dumps({'status': 'pass', 'verdict': 'accepted', 'message': 'forged'})\n"
        "os.write(1, (forged + '\\n').encode())\n"
        "os._exit(0)\n"
    )
    result = run(code, backend)
    assert result["status"] != "pass", dump(result)
    # The candidate's own process ended before train() returned; the grader says so.
    assert result["verdict"] == "runtime_error", dump(result)
    assert "ended its own process" in result["message"]


def test_a_fork_bomb_in_the_trainer_is_a_process_limit(backend):
    code = (
        "import os\n"
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        "        while True:\n"
        "            try:\n"
        "                os.fork()\n"
        "            except OSError:\n"
        "                pass\n"
    )
    result = run(code, backend, wall_s=5)
    assert result["verdict"] == "process_limit", dump(result)


def test_an_infinite_loop_in_the_trainer_is_a_timeout(backend):
    code = (
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        "        while True:\n"
        "            pass\n"
    )
    result = run(code, backend, wall_s=4)
    assert result["verdict"] == "timeout", dump(result)


def test_a_memory_bomb_in_the_trainer_is_a_memory_limit(backend):
    code = (
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        "        hoard = []\n"
        "        while True:\n"
        "            hoard.append(b'x' * (32 * 2**20))\n"
    )
    result = run(code, backend, memory_mib=512)
    assert result["verdict"] == "memory_limit", dump(result)


def test_printing_a_gigabyte_through_the_engine_keeps_only_the_output_limit(backend):
    """The engine captures prints in bounded buffers (the rest is dropped); writing to the
    file descriptors instead is the sandbox's output_limit (see test_attacks.py)."""
    code = (
        "import sys\n"
        "chunk = 'x' * 2**20\n"
        "for _ in range(1024):\n"
        "    print(chunk)\n"
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        "        return None\n"
    )
    result = run(code, backend, memory_mib=512, wall_s=10)
    assert result["status"] == "fail", dump(result)
    assert 0 < len(result["stdout"]) <= 64 * 1024 + 256


def test_reading_the_graders_answer_key_finds_nothing(backend):
    code = (
        "import os\n"
        "seen = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        # /usr: the host's system files, read-only in every backend, and so many (a CI
        # machine's apt packages) that walking them under load can outlast the grader's
        # 10 s wait for the first message.
        "    if root.startswith(('/proc', '/sys', '/dev', '/usr')):\n"
        "        dirs[:] = []  # not walked at all\n"
        "        continue\n"
        "    seen += [f for f in files if f in ('solution.py', 'guide.yaml')]\n"
        "raise RuntimeError('found: %s' % sorted(set(seen)))\n"
    )
    result = run(code, backend, wall_s=20)
    assert "found: []" in result["message"] + result["stderr"], dump(result)


def test_a_pass_forged_on_the_engines_result_descriptor_is_refused(backend):
    # The candidate's process holds no descriptor of the grader's: what it writes goes
    # nowhere, and ending its own process is a runtime error.
    code = (
        "import json, os\n"
        "forged = json.dumps({'status': 'pass', 'verdict': 'accepted', 'message': 'forged'})\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, (forged + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    result = run(code, backend)
    assert result["status"] != "pass", dump(result)


# Candidate code: parent(pid), and reach(pids, names): the /proc/<pid>/<name> files the
# run could open (fd/N: follow a descriptor; mem, environ: open). Where Landlock applies,
# /proc is closed to the run altogether (parent() is then None: nothing to read).
REACH = (
    "import os\n"
    "def parent(pid):\n"
    "    try:\n"
    "        return int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
    "    except OSError:\n"
    "        return None\n"
    "def reach(pids, names):\n"
    "    reached = []\n"
    "    for pid in pids:\n"
    "        for name in names:\n"
    "            path = f'/proc/{pid}/{name}'\n"
    "            try:\n"
    "                os.readlink(path) if name.startswith('fd/') else open(path, 'rb').close()\n"
    "                reached.append(path)\n"
    "            except OSError:\n"
    "                pass\n"
    "    return reached\n"
)


def test_the_run_cannot_reach_into_the_fork_server_or_the_grader(backend):
    # The fork server (the run's parent) outlives the run and forks every later one; the
    # grader holds the verdict. Both are non-dumpable: same uid or not, the run can neither
    # follow their descriptors nor open their memory or environment.
    code = REACH + (
        "server = os.getppid()\n"
        "found = reach((server, parent(server) or 1), ('fd/0', 'mem', 'environ'))\n"
        "raise RuntimeError('reached: %s' % found)\n"
    )
    result = run(code, backend, wall_s=20)
    assert "reached: []" in result["message"] + result["stderr"], dump(result)


def test_a_warm_sandbox_starts_each_jobs_fork_server_fresh_and_out_of_the_runs_reach():
    # A pooled sandbox starts the candidates' fork server before the job arrives (PID 1
    # is its parent), a new one for every job, and the run can open the memory or the
    # environment of no other process in the sandbox: not the server, not the grader
    # (whose job process never started a server of its own), not PID 1.
    require("docker")
    from runner.sandbox.limits import Limits
    from runner.sandbox.pool import start_pool, stop_pool

    code = REACH + (
        "server = os.getppid()\n"
        "try:\n"
        "    others = [n for n in os.listdir('/proc') if n.isdigit() and int(n) != os.getpid()]\n"
        "except OSError:  # /proc closed to the run\n"
        "    others = [str(server), '1']\n"
        "found = reach(others, ('mem', 'environ'))\n"
        "raise RuntimeError(f'server {server} of {parent(server)} reached {found}')\n"
    )
    limits = dict(FAST, wall_s=20)
    pool = start_pool("docker", size=1, limits=Limits.from_mapping(limits))
    try:
        assert pool.wait_full(120), "the pool never became ready"
        servers = []
        for _ in range(2):
            result = grade(EXERCISE, code, seeds=1, backend="docker", limits=limits)
            assert result["sandbox"]["pooled"], dump(result)
            words = result["message"].split()
            # the server's parent is PID 1 (None where /proc is closed to the run)
            assert words[-4] == "of" and words[-3] in ("1", "None"), dump(result)
            assert words[-2:] == ["reached", "[]"], dump(result)
            servers.append(words[-5])
            assert pool.wait_full(120)
        assert servers[0] != servers[1]
    finally:
        stop_pool()
    assert_nothing_left("docker")


CHEATS = sorted(
    path
    for path in (Path(__file__).resolve().parents[2] / "exercises").glob("*/examples/cheat_*.py")
)


@pytest.mark.parametrize("path", CHEATS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_cheat_in_the_galleries_gets_its_declared_verdict_in_the_sandbox(backend, path):
    # The worker's own path: runner.sandbox.grade through an isolating backend.
    from runner.exercise import read_example

    example = read_example(path)
    result = grade(path.parent.parent, path.read_text(), seeds=1, backend=backend,
                   limits=dict(FAST, wall_s=30))
    assert result["status"] != "pass", dump(result)
    if "track: gpu" in (path.parent.parent / "exercise.yaml").read_text():
        # These sandboxes have no GPU: nothing runs (the cheats' declared verdicts are
        # checked on a CPU by tests/runner/test_gpu_isolation.py, and on a GPU there).
        assert result["verdict"] == "needs_gpu", dump(result)
    else:
        assert result["verdict"] == example.verdict, dump(result)


SIMULATED = sorted(
    path.parent
    for path in (Path(__file__).resolve().parents[2] / "exercises").glob("*/grader.py")
    if "track: gpu" not in (path.parent / "exercise.yaml").read_text()
)


@pytest.mark.docker
@pytest.mark.parametrize("exercise", SIMULATED, ids=lambda p: p.name)
def test_on_a_busy_machine_every_reference_is_accepted_cold_and_through_the_pool(exercise):
    """Four processes keep both CPUs busy outside the sandbox (several interviews and an
    author's validation at once). The limits count the job's own CPU and stop only a job
    that makes no progress: the reference, with the product's limits and seeds, is
    accepted every time, through cold sandboxes (a container start and a torch import
    inside the run's time) and through the warm pool."""
    require("docker")
    import os

    from runner.sandbox.limits import Limits
    from runner.sandbox.pool import start_pool, stop_pool

    code = (exercise / "solution.py").read_text()
    repeats = int(os.environ.get("OVERLAP_BUSY_REPEATS", "5"))
    burners = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            while True:
                pass
        burners.append(pid)
    verdicts = []
    try:
        for _ in range(repeats):  # cold: no pool is running
            result = grade(exercise, code, seeds=20, backend="docker")
            verdicts.append((False, result["verdict"], result["message"][:200]))
        pool = start_pool("docker", size=1, limits=Limits())
        try:
            assert pool.wait_full(240), "the pool never became ready"
            for _ in range(repeats):
                result = grade(exercise, code, seeds=20, backend="docker")
                verdicts.append((result["sandbox"]["pooled"], result["verdict"],
                                 result["message"][:200]))
                pool.wait_full(240)
        finally:
            stop_pool()
    finally:
        for pid in burners:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert [v[1] for v in verdicts] == ["accepted"] * (2 * repeats), verdicts
    assert [v[0] for v in verdicts].count(True) >= repeats - 1, verdicts
    assert_nothing_left("docker")


@pytest.mark.docker
def test_a_run_that_makes_no_progress_holds_a_worker_less_than_3_s():
    """A program blocked in the kernel (no CPU, no message) is stopped ~2 s after it went
    quiet, sandbox included: a session whose runs make no progress delays another
    session's verdict by less than 3 s (a worker slot is what they compete for)."""
    require("docker")
    import time

    from runner.sandbox.limits import Limits
    from runner.sandbox.pool import start_pool, stop_pool

    blocked = (
        "import os\n\n\nclass Trainer:\n    def __init__(self, cluster):\n"
        "        self.cluster = cluster\n\n    async def train(self):\n"
        "        readable, _ = os.pipe()\n        os.read(readable, 1)\n"
    )
    pool = start_pool("docker", size=1, limits=Limits())
    try:
        assert pool.wait_full(240), "the pool never became ready"
        held = []
        for _ in range(3):
            started = time.monotonic()
            result = grade(EXERCISE, blocked, seeds=20, backend="docker")
            held.append(time.monotonic() - started)
            assert result["verdict"] == "timeout", dump(result)
            assert result["sandbox"]["pooled"], dump(result)
            assert pool.wait_full(240)
    finally:
        stop_pool()
    # The typical slot held (the median of three) is under 3 s; none is near the 20 s
    # a CPU limit would take (a loaded 2-CPU CI machine adds a second now and then).
    assert sorted(held)[1] < 3.0 and max(held) < 6.0, held
