"""A task goes through the real broker (Redis) to a real worker and back."""

import os

import pytest
from celery.contrib.testing.worker import start_worker

from overlap.celery import app, health


@pytest.fixture(scope="module")
def worker(django_db_blocker):
    # A worker whose sandbox cannot run takes nothing from `default`: as `make run` does on
    # a machine without docker or bwrap, the (unisolated) process backend is allowed.
    allowed = os.environ.get("OVERLAP_SANDBOX_ALLOW_PROCESS")
    os.environ["OVERLAP_SANDBOX_ALLOW_PROCESS"] = "1"
    # The worker's Django fixup touches DB connections when it starts and stops.
    try:
        with django_db_blocker.unblock(), start_worker(
            app, pool="solo", perform_ping_check=False, shutdown_timeout=10
        ) as w:
            yield w
    finally:
        if allowed is None:
            os.environ.pop("OVERLAP_SANDBOX_ALLOW_PROCESS", None)
        else:
            os.environ["OVERLAP_SANDBOX_ALLOW_PROCESS"] = allowed
    from runs.sandbox import sandbox_pool_stop

    sandbox_pool_stop()


def test_health_task_round_trip_through_redis(worker):
    assert app.conf.broker_url.startswith("redis://")
    result = health.delay("round-trip").get(timeout=20)
    assert result["token"] == "round-trip"
    assert result["worker"]


def test_only_json_is_accepted():
    assert app.conf.accept_content == ["json"]
    assert app.conf.task_serializer == "json"
