"""The GPU track's trust boundary, on a CPU: the candidate's code runs in a run process
of its own, never in the grader's, and what comes back is checked before it counts.

The ``cheat_*`` examples of the GPU exercise are graded here through the whole path
(``device="cpu"``) and must get the verdict they declare (on a GPU too:
test_gpu_on_device.py grades every example).
"""

import base64
import os

import pytest
import torch

from runner.contract import validate_result
from runner.exercise import load
from runner.gpu import grading, wire

SLUG = "gpu-gradient-accumulation"


def grade(path, trials=2):
    return grading.grade(load(SLUG), path, device="cpu", trials=trials)


def failing(result):
    return sorted(c["name"] for c in result["checks"] if c["status"] == "fail")


CHEATS = [e for e in load(SLUG).examples() if e.name.startswith("cheat_")]


def test_there_is_a_cheat_of_each_kind():
    assert {e.name for e in CHEATS} >= {
        "cheat_forged_result",
        "cheat_patch_grader",
        "cheat_malformed_report",
        "cheat_reference_weights",
        "cheat_patch_timers",
    }


@pytest.mark.parametrize("example", CHEATS, ids=[e.name for e in CHEATS])
def test_a_cheat_gets_its_declared_verdict_and_is_never_accepted(example):
    result = grade(example.path)
    validate_result(result)
    if example.verdict == "too_slow":
        # A cheat on the timing itself (patched clocks): a CPU's timings say nothing about
        # overlap, so here only its correctness is decided; test_gpu_on_device.py checks
        # that the device's clock gives it too_slow.
        assert failing(result) == [] and result["verdict"] in ("too_slow", "accepted")
        return
    assert result["verdict"] != "accepted"
    assert (result["verdict"], tuple(failing(result))) == (example.verdict, example.failing), (
        result["message"]
    )


def test_a_forged_result_breaks_the_protocol_instead_of_reaching_stdout():
    example = next(e for e in CHEATS if e.name == "cheat_forged_result")
    result = grade(example.path)
    assert "broke the grader's protocol" in result["message"]
    assert "accepted" not in result["stdout"]


def test_the_candidate_runs_in_its_own_session_with_only_its_socket(write_code):
    grader_pid = os.getpid()
    code = write_code(
        "import os\n"
        "fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))\n"
        "kinds = []\n"
        "for f in fds:\n"
        "    try:\n"
        "        kinds.append(os.readlink(f'/proc/self/fd/{f}'))\n"
        "    except OSError:\n"
        "        pass  # the directory listdir read\n"
        "print('pid', os.getpid(), 'sid', os.getsid(0))\n"
        "print('sockets', sum(k.startswith('socket:') for k in kinds))\n"
        "print('fds', len(fds))\n"
        "for pid in (os.getppid(), " + str(grader_pid) + "):\n"
        "    try:\n"
        "        os.listdir(f'/proc/{pid}/fd')\n"
        "        print('read fds of', pid)\n"
        "    except OSError:\n"
        "        print('no fds of', pid)\n"
        "import resource\n"
        "print('fsize', resource.getrlimit(resource.RLIMIT_FSIZE)[0])\n"
        "class Trainer:\n"
        "    def __init__(self, job):\n"
        "        raise RuntimeError('stop here')\n"
        "    def train(self):\n"
        "        pass\n"
    )
    result = grade(code)
    out = result["stdout"]
    assert result["verdict"] == "runtime_error"
    words = dict(line.split(" ", 1) for line in out.splitlines())
    pid, _, sid = words["pid"].partition(" sid ")
    assert int(pid) != grader_pid and int(sid) == int(pid)  # a process and session of its own
    assert words["sockets"] == "1"  # its socket to the grader, nothing else
    assert int(words["fds"]) <= 5  # stdin/out/err (/dev/null), the socket, listdir's own
    assert "read fds of" not in out  # the grader and the fork server are non-dumpable
    assert words["fsize"] == "0"


def test_the_grader_never_executes_the_candidates_file(write_code, monkeypatch):
    # A module-level statement that would show in this process if the grader exec'd it.
    monkeypatch.delenv("OVERLAP_CANARY", raising=False)
    code = write_code(
        "import os\nos.environ['OVERLAP_CANARY'] = 'ran here'\n"
        "class Trainer:\n    def __init__(self, job):\n        pass\n"
        "    def train(self):\n        return None\n"
    )
    result = grade(code)
    assert result["verdict"] == "wrong"
    assert "OVERLAP_CANARY" not in os.environ


# -- the wire ----------------------------------------------------------------------------


def test_tensors_round_trip_and_bad_sizes_are_refused():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    encoded = wire.encode_tensor(t)
    assert torch.equal(wire.decode_tensor(encoded, wire.Budget(1000)), t)
    short = dict(encoded, b=base64.b64encode(b"\0" * 20).decode())
    with pytest.raises(wire.WireError, match="length"):
        wire.decode_tensor(short, wire.Budget(1000))
    with pytest.raises(wire.WireError, match="more tensor data"):
        wire.decode_tensor(encoded, wire.Budget(8))
    with pytest.raises(wire.WireError, match="shape"):
        wire.decode_tensor(encoded, wire.Budget(1000), (3, 2))
    with pytest.raises(wire.WireError, match="dtype"):
        wire.decode_tensor(dict(encoded, **{"$x": "object"}), wire.Budget(1000))
    with pytest.raises(wire.WireError, match="unknown kind"):
        wire.decode({"__reduce__": "os.system"}, wire.Budget(0))


def test_weights_that_differ_from_the_commitment_are_refused():
    from runner.gpu.worker import _commit

    weights = [torch.randn(40, 30), torch.randn(5)]
    commit = _commit({"weights": weights}, seed=7)
    wire.verify_commit(commit, wire.encode({"weights": weights}), 7)
    later = [weights[0].clone(), weights[1]]
    later[0] += 1e-3  # trained on after it answered
    with pytest.raises(wire.WireError, match="committed"):
        wire.verify_commit(commit, wire.encode({"weights": later}), 7)
    small = [weights[0], weights[1] + 1]
    with pytest.raises(wire.WireError, match="differs"):
        wire.verify_commit(commit, wire.encode({"weights": small}), 7)
