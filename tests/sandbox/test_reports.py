"""The host's side of the contract: what enters a sandbox, and how its report is read."""

import json
import os

from runner.sandbox.job import exercise_files, grade_job
from runner.sandbox.limits import Limits
from runner.sandbox.result import RawRun, interpret

LIMITS = Limits()


def envelope(nonce: str, **overrides) -> bytes:
    body = {
        "protocol": 1,
        "nonce": nonce,
        "exit_code": 0,
        "signal": None,
        "grading_s": 0.5,
        "stdout": json.dumps({"status": "pass", "verdict": "accepted", "message": "ok"}),
        "stderr": "",
        "stdout_bytes": 10,
        "stderr_bytes": 0,
        "limit": None,
        "oom_kills": 0,
        "pids_max_events": 0,
        "tmp_free_bytes": 10**7,
        "error": None,
    }
    body.update(overrides)
    return (json.dumps(body) + "\n").encode()


def test_a_well_formed_report_gives_the_graders_result():
    result, grading_s = interpret(RawRun(stdout=envelope("n1")), "n1", LIMITS)
    assert result["status"] == "pass"
    assert grading_s == 0.5


def test_a_report_for_another_run_is_refused():
    result, _ = interpret(RawRun(stdout=envelope("someone-else")), "n1", LIMITS)
    assert result["verdict"] == "sandbox_error"
    assert "does not belong to this run" in result["message"]


def test_a_report_over_the_size_cap_is_refused():
    result, _ = interpret(RawRun(stdout=envelope("n1"), truncated=True), "n1", LIMITS)
    assert result["verdict"] == "sandbox_error"


def test_host_observed_limits_win_over_what_the_program_claimed():
    raw = RawRun(stdout=envelope("n1"), oom_killed=True)
    result, _ = interpret(raw, "n1", LIMITS)
    # The candidate's failure, not ours: the contract gives memory_limit the status fail.
    assert (result["status"], result["verdict"]) == ("fail", "memory_limit")
    raw = RawRun(stdout=envelope("n1"), host_timeout=True)
    assert interpret(raw, "n1", LIMITS)[0]["verdict"] == "timeout"


def test_a_result_whose_status_contradicts_its_verdict_is_not_taken():
    forged = json.dumps({"status": "pass", "verdict": "wrong", "message": ""})
    result, _ = interpret(RawRun(stdout=envelope("n1", stdout=forged)), "n1", LIMITS)
    assert result["verdict"] == "crash"


def test_a_result_with_a_wrong_status_is_not_taken():
    bad = json.dumps({"status": "passed!!", "verdict": "pass"})
    result, _ = interpret(RawRun(stdout=envelope("n1", stdout=bad)), "n1", LIMITS)
    assert result["verdict"] == "crash"


def test_the_graders_output_fields_are_cut_to_the_output_limit():
    long = json.dumps({"status": "fail", "verdict": "wrong", "stdout": "y" * 10**6})
    result, _ = interpret(RawRun(stdout=envelope("n1", stdout=long)), "n1", LIMITS)
    assert len(result["stdout"]) <= LIMITS.output_bytes + 1


def test_an_exercise_enters_without_its_interviewer_files_or_symlinks(tmp_path):
    (tmp_path / "grader.py").write_text("CHECKS = []")
    (tmp_path / "starter.py").write_text("pass")
    (tmp_path / "solution.py").write_text("the answer")
    (tmp_path / "guide.yaml").write_text("hints")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "good.py").write_text("pass")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "table.csv").write_text("1,2")
    os.symlink("/etc/passwd", tmp_path / "passwd.txt")
    assert sorted(exercise_files(tmp_path)) == ["data/table.csv", "grader.py", "starter.py"]


def test_a_grade_job_runs_the_engine_on_copies_of_the_files(tmp_path):
    (tmp_path / "grader.py").write_text("CHECKS = []")
    job = grade_job(tmp_path, "print(1)", seeds=3, limits=LIMITS)
    assert job.entry == {
        "module": "runner",
        "argv": ["grade", "{workdir}/exercise", "{workdir}/candidate.py", "--seeds", "3"],
    }
    assert job.files["candidate.py"] == b"print(1)"
    assert str(tmp_path) not in job.payload().decode()


def test_limits_come_from_the_exercise_with_defaults_for_the_rest():
    limits = Limits.from_mapping({"wall_s": 5})
    assert (limits.wall_s, limits.memory_mib, limits.processes) == (5, 1024, 64)
    for bad in ({"wall": 5}, {"memory_mib": 0}, {"processes": "many"}):
        try:
            Limits.from_mapping(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")
