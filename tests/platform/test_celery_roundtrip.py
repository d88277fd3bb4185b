"""A task goes through the real broker (Redis) to a real worker and back."""

import pytest
from celery.contrib.testing.worker import start_worker

from overlap.celery import app, health


@pytest.fixture(scope="module")
def worker(django_db_blocker):
    # The worker's Django fixup touches DB connections when it starts and stops.
    with django_db_blocker.unblock(), start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10
    ) as w:
        yield w
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
