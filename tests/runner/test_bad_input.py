"""Broken, hostile or half-converted code gets a clear verdict, never a hang or a crash."""

import time

from runner.sim import grading
from tests.runner.helpers import EXERCISES, check, solution_source

PS = "async-parameter-server"


def ps_solution_with(old: str, new: str) -> str:
    source = solution_source(PS)
    assert old in source
    return source.replace(old, new)


COMPUTE = "gradient = await worker.compute_gradient_async(params, batch)"


def test_syntax_error_names_the_line(write_code):
    path = write_code("import asyncio\n\nclass Trainer:\n    def train(self)\n        pass\n")
    result = grading.grade(PS, path)
    assert result["verdict"] == "syntax_error"
    assert result["status"] == "fail"
    assert result["error"]["line"] == 4
    assert "line 4" in result["message"]


def test_missing_entry_point_says_what_is_expected(write_code):
    path = write_code("class Trainr:\n    def __init__(self, cluster):\n        pass\n")
    result = grading.grade(PS, path)
    assert result["verdict"] == "missing_entry_point"
    assert "`Trainer`" in result["message"] and "`train(self)`" in result["message"]
    assert "found `Trainr`" in result["message"]


def test_missing_method_is_named(write_code):
    path = write_code("class Trainer:\n    def __init__(self, cluster):\n        pass\n")
    result = grading.grade(PS, path)
    assert result["verdict"] == "missing_entry_point"
    assert "has no `train` method" in result["message"]


def test_exception_traceback_shows_only_the_candidates_frames(write_code):
    source = ps_solution_with(COMPUTE, COMPUTE + "\n            raise RuntimeError('boom')")
    line = source.splitlines().index("            raise RuntimeError('boom')") + 1
    result = grading.grade(PS, write_code(source, name="mine.py"))
    assert result["verdict"] == "runtime_error"
    traceback = result["error"]["traceback"]
    assert traceback.splitlines()[-3:] == [
        f'  File "mine.py", line {line}, in worker_loop',
        "    raise RuntimeError('boom')",
        "RuntimeError: boom",
    ]
    assert all("mine.py" in frame for frame in traceback.splitlines() if frame.startswith("  File"))
    assert result["error"]["line"] == line
    assert f"line {line}" in result["message"]


def test_printed_fake_result_stays_in_captured_output(write_code):
    fake = '{"status": "pass", "verdict": "accepted"}'
    path = write_code(
        f"print({fake!r})\n"
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "    def train(self):\n"
        f"        print({fake!r})\n"
    )
    result = grading.grade(PS, path)
    assert result["verdict"] == "wrong"
    assert result["stdout"].count(fake) == 2
    assert check(result, "plausible")["status"] == "fail"


def test_deadlock_is_a_timeout_that_shows_where_tasks_wait(write_code):
    path = str(EXERCISES / PS / "examples" / "nested_lock_deadlock.py")
    start = time.monotonic()
    result = grading.grade(PS, path, watchdog_seconds=10)
    assert time.monotonic() - start < 10
    assert result["verdict"] == "timeout"
    assert result["message"].startswith("Deadlock at t=")
    assert (
        "`Trainer.apply` at line 27: `async with self.server_lock:  # already held by the caller`"
        in result["message"]
    )
    assert result["trace"]["candidate"]["spans"]  # what ran before it got stuck


def test_endless_loop_that_never_awaits_hits_the_cpu_limit(write_code):
    path = write_code(ps_solution_with(COMPUTE, "while True:\n                pass"))
    result = grading.grade(PS, path, watchdog_seconds=1)
    assert result["verdict"] == "timeout"
    assert "1 s of CPU" in result["message"]


def test_sleeping_too_long_hits_the_virtual_time_limit(write_code):
    path = write_code(ps_solution_with(COMPUTE, "await asyncio.sleep(10**6)"))
    result = grading.grade(PS, path)
    assert result["verdict"] == "timeout"
    assert "limit" in result["message"]


def test_polling_with_sleep_zero_is_a_livelock(write_code):
    path = write_code(
        ps_solution_with(COMPUTE, "while True:\n                await asyncio.sleep(0)")
    )
    result = grading.grade(PS, path, watchdog_seconds=20)
    assert result["verdict"] == "timeout"
    assert result["message"].startswith("Livelock")


def _blocking_variant(write_code, extra: str) -> dict:
    source = ps_solution_with(COMPUTE, COMPUTE + "\n" + extra).replace(
        "import asyncio", "import asyncio\nimport time"
    )
    return grading.grade(PS, write_code(source))


def _blocked_seconds(result: dict) -> float:
    spans = result["trace"]["candidate"]["spans"]
    return sum(s["end"] - s["start"] for s in spans if s["lane"] == "blocked")


def test_time_sleep_costs_its_time_and_blocks_everyone(write_code):
    solution_time = grading.grade(PS, str(EXERCISES / PS / "solution.py"), seeds=0)["metrics"][
        "candidate_time"
    ]
    result = _blocking_variant(write_code, "            time.sleep(0.05)")
    # 48 batches x 0.05 s of sleep, each blocking the whole loop
    assert abs(_blocked_seconds(result) - 48 * 0.05) < 1e-6
    assert result["metrics"]["candidate_time"] > solution_time + 1.0
    assert result["verdict"] == "too_slow"
    assert "time.sleep x48" in check(result, "blocking_calls")["message"]


def test_busy_wait_on_the_clock_costs_its_time_and_ends(write_code):
    spin = (
        "            end = time.monotonic() + 0.05\n"
        "            while time.monotonic() < end:\n"
        "                pass"
    )
    result = _blocking_variant(write_code, spin)
    # each spin lasts until its deadline (to within one clock read), blocking everyone
    assert 48 * 0.05 <= _blocked_seconds(result) <= 48 * (0.05 + 2e-3)
    assert result["verdict"] == "too_slow"
    assert "reading the clock" in check(result, "blocking_calls")["message"]


def test_to_thread_runs_beside_the_loop_as_a_real_thread_would_and_is_reported(write_code):
    source = ps_solution_with(
        COMPUTE, "gradient = await asyncio.to_thread(worker.compute_gradient, params, batch)"
    )
    result = grading.grade(PS, write_code(source))
    # The computation waits in its thread while the loop serves the other workers (it
    # used to run inline, blocking everyone: 1.00x, too_slow).
    assert result["verdict"] == "accepted", result["message"]
    assert result["metrics"]["speedup"] > 4.0
    assert check(result, "threads")["status"] == "warn"
    assert "run_in_executor x48" in check(result, "threads")["message"]


def test_asyncio_run_inside_a_synchronous_train_works(write_code):
    source = solution_source(PS).replace(
        "    async def train(self):\n        await",
        "    def train(self):\n"
        "        asyncio.run(self.main())\n\n"
        "    async def main(self):\n"
        "        await",
    )
    result = grading.grade(PS, write_code(source))
    assert result["verdict"] == "accepted"


def test_output_is_bounded(write_code):
    source = solution_source(PS).replace(
        "    async def train(self):", "    async def train(self):\n        print('x' * 200_000)"
    )
    result = grading.grade(PS, write_code(source))
    assert len(result["stdout"]) < 70_000
    assert "more characters of output cut" in result["stdout"]


def test_exit_is_a_runtime_error(write_code):
    source = solution_source(PS).replace(
        "    async def train(self):", "    async def train(self):\n        raise SystemExit(3)"
    )
    result = grading.grade(PS, write_code(source))
    assert result["verdict"] == "runtime_error"
    assert "exit()" in result["message"]


def test_time_between_two_sleeps_that_the_loop_spent_waiting_is_not_blocked(write_code):
    # The awaited sleep lets every other task run: only the two time.sleep calls block.
    extra = (
        "            time.sleep(0.01)\n"
        "            await asyncio.sleep(0.05)\n"
        "            time.sleep(0.01)"
    )
    result = _blocking_variant(write_code, extra)
    assert abs(_blocked_seconds(result) - 48 * 0.02) < 1e-6
    assert "time.sleep x96" in check(result, "blocking_calls")["message"]
