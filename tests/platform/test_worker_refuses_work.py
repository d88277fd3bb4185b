"""A worker told to use a sandbox that cannot run here (docker with no engine, or its
image missing) refuses work: it says so once, loudly, stops consuming the queues whose
jobs need a sandbox, and its heartbeat says why, so a Run is refused with a clear message
and jobs wait for a worker that can grade instead of each failing. It takes work again
once the sandbox works.

The reports are real: `OVERLAP_SANDBOX=docker` with an image tag that exists nowhere
cannot grade on any machine (no engine answers, or the image is missing)."""

import logging
import time
import uuid

import pytest
from celery.contrib.testing.worker import start_worker
from django.urls import reverse

from monitoring import heartbeat, store
from monitoring.sandbox_report import sandbox_report
from monitoring.worker_gate import Gate, refusal
from overlap.celery import app, health
from runs import services as run_services
from runs.models import Run

pytestmark = pytest.mark.django_db

HOST = "refusing@worker-gate-tests"
MISSING_IMAGE = "overlap-sandbox:no-such-image-for-worker-gate-tests"
# Only the "fixed" case fakes its report: this machine may have no usable sandbox at all.
USABLE = {"configured": "process", "chosen": "process",
          "problems": {"docker": "no Docker engine answers", "bwrap": None, "process": None},
          "image": {}}


@pytest.fixture(autouse=True)
def clean_monitoring_keys():
    """No heartbeat of another test (same Redis database) or of an in-thread worker that
    an earlier test left running counts here, and none of ours outlives the test."""
    from monitoring import signals

    def clean():
        signals._worker_stops()
        client = store.client()
        for key in client.scan_iter(match=store.PREFIX + "*"):
            client.delete(key)

    clean()
    yield
    clean()


@pytest.fixture
def unusable_docker(settings, monkeypatch):
    settings.OVERLAP_SANDBOX = "docker"
    monkeypatch.setenv("OVERLAP_SANDBOX_IMAGE", MISSING_IMAGE)


@pytest.fixture
def gate():
    """A worker's gate and its heartbeat, as a worker's main process has them; the
    queues it cancels and adds are recorded instead of a consumer's."""
    beating = heartbeat.Heartbeat(hostname=HOST,
                                  queues=["authoring", "default", "recovery"]).start()
    # Its thread's own first report is in before the gate's decisions (they replace it).
    assert _until(lambda: _mine().get("sandbox_report"), 10)
    calls: list[tuple[str, str]] = []
    gate = Gate(hostname=HOST, queues=["default", "authoring"],
                cancel=lambda queue: calls.append(("cancel", queue)),
                add=lambda queue: calls.append(("add", queue)))
    gate.calls = calls
    yield gate
    gate.stop()
    beating.stop()


def _gate_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name == "monitoring.worker_gate" and r.levelno >= logging.ERROR]


def _mine() -> dict:
    return next(w for w in heartbeat.workers_online() if w["hostname"] == HOST)


def test_the_real_report_of_an_unusable_docker_sandbox_is_a_refusal(unusable_docker):
    report = sandbox_report()
    assert report["configured"] == "docker"
    why = refusal(report)
    assert why and ("no Docker engine answers" in why or MISSING_IMAGE in why), why


def test_a_worker_that_cannot_grade_refuses_its_sandbox_queues_and_resumes_when_fixed(
        unusable_docker, gate, caplog, client):
    caplog.set_level(logging.INFO, logger="monitoring.worker_gate")

    why = gate.check()  # a fresh, real report
    assert why
    assert gate.calls == [("cancel", "authoring"), ("cancel", "default")]
    errors = _gate_errors(caplog)
    assert len(errors) == 1
    line = errors[0].getMessage()
    assert line.startswith("sandbox unusable: ") and why in line and "fix: " in line
    assert HOST in line and "refuses work" in line

    mine = _mine()  # its heartbeat says so at once
    assert mine["refusing"] == {"queues": ["authoring", "default"], "why": why}
    assert mine["queues"] == ["authoring", "default", "recovery"]
    assert not heartbeat.queue_served("default")
    assert not heartbeat.queue_served("authoring")
    assert heartbeat.queue_served("recovery")  # beat's recovery task needs no sandbox
    assert heartbeat.queue_refusal("default") == why
    worker_check = client.get("/healthz").json()["checks"]["worker"]
    assert worker_check["ok"] is False
    assert worker_check["refusing"] == {HOST: why}
    assert _workers_online_metric(client) == 0

    # A second look that finds the same problem changes nothing and says nothing again.
    assert gate.check() == why
    assert len(gate.calls) == 2
    assert len(_gate_errors(caplog)) == 1

    # The sandbox works now (e.g. the image was built): it consumes its queues again.
    assert gate.check(USABLE) is None
    assert gate.calls[2:] == [("add", "authoring"), ("add", "default")]
    assert any("sandbox usable again" in r.getMessage() for r in caplog.records)
    assert _mine()["refusing"] == {}
    assert heartbeat.queue_served("default") and heartbeat.queue_served("authoring")
    assert heartbeat.queue_refusal("default") is None
    assert client.get("/healthz").status_code == 200
    assert _workers_online_metric(client) == 1


def _workers_online_metric(client) -> float:
    for line in client.get("/metrics").content.decode().splitlines():
        if line.startswith('overlap_workers_online{queue="default"} '):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no overlap_workers_online for default")


def test_one_refusing_process_makes_its_whole_worker_refuse():
    """The main process decides; the pool processes' heartbeats only list the queues
    they were started with. Another worker that takes the queue still serves it."""
    heartbeat.beat(hostname=HOST, queues=["default"], pid=101)  # a pool process
    heartbeat.beat(hostname=HOST, queues=["recovery"], pid=100,
                   refusing={"queues": ["default"], "why": "its image is missing"})
    assert not heartbeat.queue_served("default")
    assert heartbeat.queue_refusal("default") == "its image is missing"
    heartbeat.beat(hostname="able@worker-gate-tests", queues=["default"], pid=102)
    assert heartbeat.queue_served("default")
    assert heartbeat.queue_refusal("default") is None


def test_a_gpu_worker_that_refuses_is_no_gpu_worker_online():
    heartbeat.beat(hostname="gpu@worker-gate-tests", queues=[], pid=103,
                   refusing={"queues": ["gpu"], "why": "its image is missing"})
    assert not run_services.gpu_worker_online()  # a GPU Run gets NO_GPU_WORKER at once


def test_a_stale_image_is_a_refusal_unless_the_worker_allows_stale_images():
    stale = {"configured": "docker", "chosen": "docker", "problems": {"docker": None},
             "image": {"name": "overlap-sandbox:latest", "present": True, "fresh": False}}
    assert "built from other runner sources" in refusal(stale)
    stale["image"]["stale_allowed"] = True  # OVERLAP_SANDBOX_ALLOW_STALE_IMAGE=1
    assert refusal(stale) is None


def test_a_run_is_refused_with_a_clear_message_while_every_worker_refuses(
        unusable_docker, gate, live_session, client):
    assert gate.check()
    response = client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
    assert response.status_code == 200
    assert run_services.NO_WORKER_CAN_GRADE in response.content.decode()
    assert not live_session.runs.exists()  # nothing was queued to fail or to hang
    with pytest.raises(run_services.RunRefused, match="No grading worker can run code"):
        run_services.run_create(session=live_session, code="x = 1\n",
                                requested_by="interviewer")

    # A run queued before the worker began refusing says why it waits.
    queued = Run.objects.create(session=live_session, code="x = 1\n",
                                exercise_version=live_session.exercise_version)
    poll = reverse("candidate:run_status", args=[live_session.token, queued.pk])
    assert run_services.WAITING_FOR_A_WORKER in client.get(poll).content.decode()
    gate.check(USABLE)
    assert run_services.WAITING_FOR_A_WORKER not in client.get(poll).content.decode()


@pytest.fixture
def refusing_worker(transactional_db, django_db_blocker, unusable_docker, settings):
    """A real worker in a thread, told to use docker with an image that exists nowhere."""
    settings.OVERLAP_HEARTBEAT_SECONDS = 1  # how soon it looks again
    with django_db_blocker.unblock(), start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10,
        queues=["default"], hostname=HOST,
    ) as running:
        yield running


def _until(predicate, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def test_a_job_waits_while_the_only_worker_refuses_and_runs_once_it_can_grade(
        refusing_worker, settings, monkeypatch):
    refusing = _until(lambda: next((w["refusing"] for w in heartbeat.workers_online()
                                    if w["hostname"] == HOST and w["refusing"]), None), 10)
    assert refusing and refusing["queues"] == ["default"], heartbeat.workers_online()
    assert not heartbeat.queue_served("default")

    waiting_before = store.client().llen("default")
    job = health.delay(f"waits-{uuid.uuid4().hex[:8]}")
    time.sleep(3)  # three re-checks: the worker still refuses, the job stays queued
    assert not job.ready()
    assert store.client().llen("default") >= waiting_before + 1

    # The sandbox can run now (the process backend, allowed): it takes work again.
    settings.OVERLAP_SANDBOX = "process"
    monkeypatch.setenv("OVERLAP_SANDBOX_ALLOW_PROCESS", "1")
    assert job.get(timeout=20)["token"].startswith("waits-")
    assert _until(lambda: heartbeat.queue_served("default"), 5)


def test_a_worker_whose_sandbox_daemon_is_not_there_refuses_and_says_how_to_fix_it(
        settings, monkeypatch, tmp_path):
    from monitoring.worker_gate import fix_for

    settings.OVERLAP_SANDBOX = "daemon"
    monkeypatch.setenv("OVERLAP_SANDBOX_SOCKET", str(tmp_path / "sandbox.sock"))
    report = sandbox_report()
    assert report["configured"] == "daemon" and report["chosen"] == ""
    assert "image" not in report  # the worker has no engine to ask: the daemon checks it
    why = refusal(report)
    assert why and "no sandbox daemon socket" in why, why
    assert "compose service sandboxd" in fix_for(why)
    # A daemon that answers but whose image is stale: the fix is the image, not the daemon.
    stale = ("no sandbox it may use works (daemon: the sandbox daemon cannot run "
             "sandboxes: the sandbox image overlap-sandbox:latest was built from other "
             "runner sources than this checkout's)")
    assert "make sandbox-image" in fix_for(stale)
