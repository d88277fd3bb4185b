"""Fault injection on a real stack (own Redis, own database, worker and beat processes, the
configured sandbox), with nobody polling: every run ends — a verdict, or a clear internal
error — within 2 minutes, none is duplicated, none is stuck."""

import signal
import time
import urllib.error

import pytest

from ops.bench_live import Browser
from tests.faults.harness import TERMINAL, Stack, wait_for

pytestmark = pytest.mark.slow
DEADLINE_S = 120


@pytest.fixture
def stack(tmp_path):
    stack = Stack(tmp_path)
    stack.redis.start()
    stack.prepare()
    yield stack
    stack.stop()


def _assert_all_ended_once(stack: Stack, expected: int) -> None:
    runs = stack.runs()
    assert len(runs) == expected, runs  # no duplicated run rows
    for run_id, status, verdict, attempts, error in runs:
        assert status in TERMINAL, (run_id, status)
        # Graded at most twice (a retry after the kill), never more.
        assert 1 <= attempts <= 2, (run_id, attempts)
        if status == "done":
            assert verdict, run_id
        else:
            assert verdict == "internal_error" and error, (run_id, error)


def test_a_worker_killed_mid_run_loses_nothing(stack):
    """SIGKILL the whole worker (main process and children) while runs are running; a new
    worker comes up; Celery beat retries what the dead one held."""
    stack.start_beat()
    stack.start_worker("worker-a")
    tokens = stack.sessions(4)
    stack.click_runs(tokens)
    assert wait_for(lambda: sum(r[1] == "running" for r in stack.runs()) >= 1, 180), \
        stack.log("worker-a")
    killed_at = time.monotonic()
    stack.kill("worker-a", signal.SIGKILL)
    time.sleep(2)
    stack.start_worker("worker-b")
    finished = wait_for(stack.all_finished, DEADLINE_S, every=1)
    took = time.monotonic() - killed_at
    assert finished, (stack.runs(), stack.log("worker-b")[-3000:], stack.log("beat")[-2000:])
    _assert_all_ended_once(stack, 4)
    print(f"worker SIGKILL: all 4 runs ended {took:.0f} s after the kill: {stack.runs()}")


@pytest.mark.parametrize("worker_back_after", [4, 30])
def test_redis_restarted_empty_with_runs_queued(stack, worker_back_after):
    """6 runs queued, no worker; Redis is killed and restarted empty (the messages are
    gone); the worker comes back 4 s or 30 s later. Beat re-sends each lost run once."""
    stack.start_beat()
    tokens = stack.sessions(6)
    stack.click_runs(tokens)
    assert [r[1] for r in stack.runs()] == ["queued"] * 6
    stack.redis.kill()
    stack.redis.start()
    restarted_at = time.monotonic()
    time.sleep(worker_back_after)
    stack.start_worker("worker")
    finished = wait_for(stack.all_finished, DEADLINE_S, every=1)
    took = time.monotonic() - restarted_at
    assert finished, (stack.runs(), stack.log("worker")[-3000:], stack.log("beat")[-2000:])
    _assert_all_ended_once(stack, 6)
    assert all(r[1] == "done" for r in stack.runs()), stack.runs()
    print(f"Redis restarted empty, worker back after {worker_back_after} s: all 6 runs "
          f"ended {took:.0f} s after the restart")


def _post(browser, path: str, data: dict) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        return 200, browser.post(path, data), time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), time.monotonic() - started


def test_a_run_during_a_redis_outage_is_told_at_once_and_blocks_nothing(stack):
    """Over HTTP, DEBUG off: a clear 503 message within seconds (not a 500, not a debug
    page), and the candidate's next Run, once Redis is back, gets a verdict."""
    stack.start_worker("worker")
    stack.start_beat()
    base = stack.start_web()
    token = stack.sessions(1)[0]
    browser = Browser(base)
    browser.get(f"/c/{token}/")  # the candidate's page (and its CSRF cookie)
    stack.redis.kill()
    status, html, took = _post(browser, f"/c/{token}/run/", {"code": "x = 1\n"})
    assert status == 503, html[:500]
    assert "unavailable right now" in html and "Traceback" not in html
    assert took < 5, took
    assert [r[1] for r in stack.runs()] == ["internal_error"]

    stack.redis.start()
    status, html, _ = _post(browser, f"/c/{token}/run/", {"code": "x = 2\n"})
    assert status == 200 and "Queued" in html, html[:500]
    assert wait_for(stack.all_finished, DEADLINE_S, every=1), (stack.runs(), stack.log("worker"))
    assert stack.runs()[-1][1] == "done"


def test_a_worker_that_cannot_reach_the_database_takes_no_work(stack):
    """A wrong DATABASE_URL: the worker exits loudly at start and the queued message stays
    for a worker that can do the work."""
    import redis as redis_client

    stack.start_beat()
    tokens = stack.sessions(1)
    stack.kill("beat", signal.SIGTERM)  # nothing else touches the queue now
    stack.click_runs(tokens)
    broker = redis_client.Redis.from_url(stack.redis.url)
    assert broker.llen("default") == 1
    wrong = (stack.db.url.rsplit("/", 1)[0] + "/no_such_database_overlap" if stack.db.postgres
             else "sqlite:////no-such-folder-overlap/overlap.sqlite3")
    worker = stack.start_worker("wrong-db", extra_env={"DATABASE_URL": wrong})
    assert worker.wait(timeout=60) != 0, stack.log("wrong-db")
    stack.procs.pop("wrong-db")
    assert "database cannot be reached" in stack.log("wrong-db")
    assert broker.llen("default") == 1, "the worker took a message it could not handle"
    assert [r[1] for r in stack.runs()] == ["queued"]
