"""The command-line contract the sandbox and the web app rely on."""

import json
import re
import shutil

from tests.runner.helpers import EXERCISES, TINY, run_cli


def test_grade_prints_one_json_document_and_exits_zero_on_a_wrong_verdict():
    done = run_cli("grade", str(TINY), str(TINY / "examples" / "skips_a_batch.py"))
    assert done.returncode == 0
    result = json.loads(done.stdout)  # the whole of stdout is one document
    assert result["schema"] == "overlap.grade/1"
    assert (result["status"], result["verdict"]) == ("fail", "wrong")
    for key in ("message", "checks", "metrics", "trace", "stdout", "stderr"):
        assert key in result
    for key in ("baseline_time", "candidate_time", "speedup", "target_speedup", "bound_speedup"):
        assert key in result["metrics"]
    assert result["metrics"]["clock"] == "virtual"
    assert {"name", "status", "message"} <= set(result["checks"][0])


def test_grade_accepts_a_slug(tmp_path):
    code = tmp_path / "mine.py"
    shutil.copy(EXERCISES / "async-parameter-server" / "solution.py", code)
    done = run_cli("grade", "async-parameter-server", str(code), "--seeds", "2")
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["verdict"] == "accepted"
    assert result["metrics"]["seeds"] == 2
    assert result["trace"]["baseline"]["spans"] and result["trace"]["candidate"]["spans"]


def test_candidate_writing_to_file_descriptor_1_cannot_fake_the_result(tmp_path):
    code = tmp_path / "fake.py"
    code.write_text(
        "import os\n"
        'os.write(1, b\'{"status": "pass", "verdict": "accepted"}\\n\')\n'
        'print(\'{"status": "pass"}\')\n'
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        "        pass\n"
    )
    done = run_cli("grade", str(TINY), str(code))
    assert done.returncode == 0
    assert len(done.stdout.strip().splitlines()) == 1
    result = json.loads(done.stdout)
    assert result["verdict"] == "wrong"
    assert '{"status": "pass"}' in result["stdout"]


def test_unknown_exercise_is_bad_usage_with_a_json_error(tmp_path):
    code = tmp_path / "x.py"
    code.write_text("")
    done = run_cli("grade", "no-such-exercise", str(code))
    assert done.returncode == 2
    result = json.loads(done.stdout)
    assert (result["status"], result["verdict"]) == ("error", "internal_error")
    assert "no-such-exercise" in result["message"]


def test_missing_code_file_is_bad_usage():
    done = run_cli("grade", str(TINY), "/nonexistent/code.py")
    assert done.returncode == 2
    assert json.loads(done.stdout)["status"] == "error"


def test_missing_arguments_are_bad_usage():
    done = run_cli("grade")
    assert done.returncode == 2
    assert "usage" in done.stderr


def test_validate_passes_a_consistent_exercise():
    done = run_cli("validate", str(TINY))
    assert done.returncode == 0, done.stdout
    assert "ok   examples/skips_a_batch.py" in done.stdout


def test_validate_fails_when_an_example_gets_another_verdict(tmp_path):
    broken = tmp_path / "tiny"
    shutil.copytree(TINY, broken)
    example = broken / "examples" / "skips_a_batch.py"
    example.write_text(example.read_text().replace("expect: wrong", "expect: accepted"))
    done = run_cli("validate", str(broken))
    assert done.returncode == 1
    assert "FAIL examples/skips_a_batch.py" in done.stdout
    assert "expected accepted" in done.stdout


def test_bench_reports_cpu_time_per_exercise():
    done = run_cli("bench", str(TINY), "--repeat", "1")
    assert done.returncode == 0
    row = next(line for line in done.stdout.splitlines() if line.startswith("tiny"))
    assert row.split()[5] == "accepted"
    # how it splits: the grader's and the candidates' processes, and what they exchanged
    assert re.search(r"\(\d+\.\d+ s \+ \d+\.\d+ s; \d+ processes, \d+ messages\)", row), row
    assert "start-up" in done.stdout
