"""The GPU exercise's correctness checks, run on a CPU with the same code.

Streams cannot race on a CPU, so races are simulated by changing what the run process
reported (a validation that read other weights, weights that changed under a validation);
the checker must name them. Candidate code that uses CUDA streams runs here, in its run
process, against stand-ins for torch.cuda's stream API (``runner.gpu.kit.cpu_stream_stand_ins``),
which is enough to check its arithmetic.
"""

import os
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from runner.exercise import load
from runner.gpu import grading
from runner.gpu.host import RunRecord
from runner.gpu.kit import max_difference
from runner.harness import Program

SLUG = "gpu-gradient-accumulation"
NAMES = ["validation", "losses", "stop_epoch", "final_weights", "wasted_work"]
DEPENDENT = NAMES[1:]


@pytest.fixture(scope="module")
def exercise():
    return load(SLUG)


def starter_run(exercise):
    """The starter's run on CPU and the reference built from it (as grading does)."""
    harness = grading._Harness(exercise, torch.device("cpu"), exercise.cpu_config)
    starter = Program.from_file(exercise.starter)
    config = exercise.no_early_stop(exercise.cpu_config)
    trajectory = harness.run_once(
        starter, harness.new_run("trajectory", config=config), trusted=True, no_early_stop=True
    )
    run = harness.run_once(starter, harness.new_run("reference"), trusted=True)
    return run, exercise.reference(trajectory, run)


def statuses(checks):
    return {c.name: c.status for c in checks}


def test_the_starter_passes_every_check(exercise):
    run, ref = starter_run(exercise)
    checks = exercise.check(run, ref)
    assert [c.name for c in checks] == NAMES
    assert set(statuses(checks).values()) == {"pass"}
    assert 0 < ref.stop_epoch < exercise.cpu_config.max_epochs - 2  # early stopping fires


def test_reference_epochs_are_far_apart_compared_with_the_tolerance(exercise):
    _, ref = starter_run(exercise)
    grader = sys.modules["overlap_grader_gpu_gradient_accumulation"]
    gaps = [
        max_difference(ref.epoch_weights[e], ref.epoch_weights[e - 1])
        for e in range(1, ref.stop_epoch + 2)
    ]
    assert min(gaps) > 10 * grader.WEIGHT_ATOL


def test_training_on_a_batch_that_had_not_landed_fails_and_skips_what_follows(exercise):
    run, ref = starter_run(exercise)
    record = run.recorder.validations[2]
    record.weights = [w.clone() for w in record.weights]
    record.weights[0][:5] += 0.01  # a step of epoch 2 trained on a half-copied batch
    checks = exercise.check(run, ref)
    found = statuses(checks)
    assert found["validation"] == "fail"
    assert {found[name] for name in DEPENDENT} == {"skip"}
    assert "Validation pass 3 read weights that are no epoch's end" in checks[0].message
    assert "before its copy to the device had finished" in checks[0].message


def test_a_validation_over_batches_that_had_not_landed_fails(exercise):
    run, ref = starter_run(exercise)
    record = run.recorder.validations[3]
    record.loss = record.loss * 1.001  # one validation batch still held older data
    checks = exercise.check(run, ref)
    assert statuses(checks)["validation"] == "fail"
    assert "the batches it was given were not what the host holds" in checks[0].message


def test_a_stale_snapshot_from_an_earlier_epoch_fails(exercise):
    run, ref = starter_run(exercise)
    validations = run.recorder.validations
    validations[3].weights = validations[2].weights
    validations[3].loss = validations[2].loss
    checks = exercise.check(run, ref)
    assert "read the weights of epoch 2, which an earlier pass" in checks[0].message


def test_an_epoch_never_validated_fails(exercise):
    run, ref = starter_run(exercise)
    del run.recorder.validations[ref.stop_epoch]
    checks = exercise.check(run, ref)
    assert f"Epoch {ref.stop_epoch} was never validated" in checks[0].message


def test_returning_another_epochs_weights_fails_only_final_weights(exercise):
    run, ref = starter_run(exercise)
    run.returned["weights"] = ref.epoch_weights[ref.stop_epoch - 1]
    found = statuses(exercise.check(run, ref))
    assert [name for name, status in found.items() if status == "fail"] == ["final_weights"]


def test_a_loss_read_before_validation_wrote_it_fails_losses(exercise):
    run, ref = starter_run(exercise)
    run.returned["losses"][2] = 0.0  # the pinned buffer before the copy arrived
    checks = exercise.check(run, ref)
    assert statuses(checks)["losses"] == "fail"
    assert "epoch 2 is 0" in next(c for c in checks if c.name == "losses").message


def test_training_two_epochs_past_the_stop_fails_wasted_work(exercise):
    run, ref = starter_run(exercise)
    run.recorder.steps += 2 * ref.steps_per_epoch
    checks = exercise.check(run, ref)
    assert statuses(checks)["wasted_work"] == "fail"


def test_a_result_of_the_wrong_shape_is_explained(exercise):
    run, ref = starter_run(exercise)
    run.returned = run.returned["weights"]
    checks = exercise.check(run, ref)
    message = next(c for c in checks if c.name == "stop_epoch").message
    assert message.startswith('train() must return {"stop_epoch"')


# -- the whole path on a CPU ---------------------------------------------------------------


def grade(path, trials=2):
    exercise = load(SLUG)
    return grading.grade(exercise, path, device="cpu", trials=trials)


def failing(result):
    return sorted(c["name"] for c in result["checks"] if c["status"] == "fail")


def test_the_reference_solution_is_correct(exercise):
    result = grade(exercise.solution)
    checks = {c["name"]: c["status"] for c in result["checks"]}
    assert {checks[name] for name in NAMES} == {"pass"}, result["message"]
    assert checks["host_syncs"] == "skip"  # only detected on CUDA
    metrics = result["metrics"]
    assert metrics["clock"] == "perf_counter" and metrics["device"] == "cpu"
    assert metrics["order"] == "A B A B A B"  # one warm-up pair, two trials
    assert set(metrics["speedup_spread"]) == {"median", "q1", "q3", "min", "max", "n"}
    assert set(metrics["components"]) == {"copy_epoch", "compute_epoch", "serial_epoch"}
    lanes = result["trace"]["candidate"]["lanes"]
    ops = {span["op"] for span in result["trace"]["baseline"]["spans"]}
    assert lanes == ["training stream"] and ops == {"train", "validate"}


def test_a_logic_bug_gets_the_failing_checks_its_example_declares(exercise):
    example = next(e for e in exercise.examples() if e.name == "patience_off_by_one")
    result = grade(example.path)
    assert result["verdict"] == example.verdict
    assert tuple(failing(result)) == example.failing


def test_an_exception_in_the_candidate_is_a_runtime_error(exercise):
    result = grade(next(e.path for e in exercise.examples() if e.name == "dropped_checkpoint"))
    assert result["verdict"] == "runtime_error"
    assert result["error"]["line"] is not None
    assert "KeyError" in result["message"]


def test_an_answer_memoised_in_one_run_never_reaches_another(write_code):
    # Trains honestly once and tries to keep the answer for later runs (in the process's
    # modules and in a file) to replay it without training. Every run is a fresh
    # process that can write no file, so every run trains: no run finds a memo.
    marker = Path(tempfile.gettempdir()) / f"overlap-memo-{os.getpid()}"  # anyone may write
    marker.unlink(missing_ok=True)
    starter = load(SLUG).starter.read_text()
    source = starter.replace(
        "    def train(self):\n",
        "    def train(self):\n"
        "        import sys, types\n"
        "        memo = sys.modules.setdefault('memo', types.ModuleType('memo'))\n"
        "        if hasattr(memo, 'answer'):\n"
        "            raise RuntimeError('found a memo in this process')\n"
        "        try:\n"
        f"            if open({str(marker)!r}).read():\n"
        "                raise RuntimeError('found a memo file')\n"
        "        except OSError:\n"
        "            pass\n"
        "        memo.answer = self.honest_train()\n"
        "        try:\n"
        f"            with open({str(marker)!r}, 'w') as f:\n"
        "                f.write('x' * 100)\n"
        "        except OSError as exc:\n"
        "            print('cannot write:', exc)\n"
        "        return memo.answer\n\n"
        "    def honest_train(self):\n",
    )
    try:
        result = grade(write_code(source))
        assert not marker.exists() or marker.stat().st_size == 0
    finally:
        marker.unlink(missing_ok=True)
    statuses = {c["name"]: c["status"] for c in result["checks"]}
    assert {statuses[name] for name in NAMES} == {"pass"}, result["message"]  # no memo found
    assert result["verdict"] != "runtime_error"  # (CPU timings say nothing: no verdict)
    assert "cannot write" in result["stdout"]
    assert result["metrics"]["runs"] == 4  # checked, warm-up, two trials: each trained


# -- host synchronisations (recorded on CUDA; the verdict logic is plain Python) -------------


def synced_run(tmp_path, syncs, steps):
    code = tmp_path / "candidate.py"
    code.write_text("a = 1\nloss = x.item()\nprint(loss)\n")
    run = grading.GpuRun("checked", None, config=None, recorder=RunRecord(torch.device("cuda")))
    run.recorder.steps = steps
    run.syncs = syncs
    return run, Program.from_file(code)


def test_host_syncs_while_training_remains_are_listed_by_line(tmp_path):
    syncs = [(2, 3, "synchronizing operation"), (2, 5, "synchronizing operation")]
    syncs.append((3, 10, "synchronizing operation"))  # after the last step: allowed
    run, program = synced_run(tmp_path, syncs, steps=10)
    check = grading._host_sync_check(run, program)
    assert check.status == "warn"
    assert "waited for the device 2 times" in check.message
    assert "line 2 `loss = x.item()` x2" in check.message
    assert "line 3" not in check.message


def test_a_sync_after_the_last_step_is_fine(tmp_path):
    run, program = synced_run(tmp_path, [(3, 10, "synchronizing operation")], steps=10)
    assert grading._host_sync_check(run, program).status == "pass"
