"""/healthz, /metrics and the system status page, against real Redis, the database and a
real Celery worker."""

import time
from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.contrib.auth.models import User
from django.test import Client

from monitoring import heartbeat, store
from overlap.celery import app
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def clean_monitoring_keys():
    """Heartbeats and counters of earlier tests (same Redis database) are forgotten, and
    so are heartbeat threads of in-thread workers that earlier tests left running."""
    from monitoring import signals

    signals._worker_stops()
    client = store.client()
    for key in client.scan_iter(match=store.PREFIX + "*"):
        client.delete(key)
    yield


@pytest.fixture
def staff_groups(transactional_db):
    """Transactional tests empty the tables, the groups a migration made included."""
    from django.contrib.auth.models import Group

    for name in ("interviewers", "authors"):
        Group.objects.get_or_create(name=name)


@pytest.fixture
def worker(transactional_db, django_db_blocker, settings, monkeypatch):
    """A real worker in a thread; its own database connection sees committed data only,
    hence transactional_db."""
    settings.OVERLAP_SANDBOX = "docker"  # this image tag does not exist: it refuses work
    monkeypatch.setenv("OVERLAP_SANDBOX_IMAGE",
                       "overlap-sandbox:no-such-image-for-monitoring-tests")
    with django_db_blocker.unblock(), start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10,
        queues=["default"], hostname="refuses@monitoring-tests",  # its own: no other
    ) as running:                                                # worker's state is ours
        yield running
    from monitoring import signals

    signals._worker_stops()


def _value(text: str, series: str) -> float:
    """The value of one exact series line, e.g. 'overlap_queue_depth{queue="default"}'."""
    for line in text.splitlines():
        if line.rsplit(" ", 1)[0] == series:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_health_is_503_and_says_why_when_no_worker_beats(client):
    response = client.get("/healthz")
    assert response.status_code == 503
    report = response.json()
    assert report["status"] == "down"
    assert report["checks"]["database"]["ok"] is True
    assert report["checks"]["redis"]["ok"] is True
    assert report["checks"]["worker"]["ok"] is False
    assert "no Celery worker heartbeat" in report["checks"]["worker"]["error"]


@pytest.fixture
def read_only_database(db):
    """The database still answers reads but refuses every write, as a PostgreSQL standby
    or `default_transaction_read_only` does (or a SQLite file opened read-only)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # This test's transaction turns read-only; it is rolled back when the test
            # ends, and the connection's next transaction is read-write again.
            cursor.execute("SET TRANSACTION READ ONLY")
            yield
        elif connection.vendor == "sqlite":
            cursor.execute("PRAGMA query_only = ON")
            try:
                yield
            finally:
                cursor.execute("PRAGMA query_only = OFF")
        else:
            pytest.skip(f"no read-only switch for {connection.vendor}")


def test_health_is_503_when_the_database_reads_but_cannot_write(
        client, settings, read_only_database):
    from django.db import connection

    settings.OVERLAP_HEALTH_NEEDS_WORKER = False  # the database alone decides here
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # reads still work: a read alone says nothing is wrong
    response = client.get("/healthz")
    assert response.status_code == 503, response.json()
    report = response.json()
    assert report["status"] == "down"
    database = report["checks"]["database"]
    assert database["ok"] is False
    assert database["error"].startswith("database cannot write: "), database
    assert "read-only" in database["error"] or "readonly" in database["error"]
    assert report["checks"]["redis"]["ok"] is True
    # Anyone else learns only that the site is down, not why.
    settings.OVERLAP_METRICS_TOKEN = "s3cret-token"
    public = client.get("/healthz", REMOTE_ADDR="198.51.100.4")
    assert public.status_code == 503 and public.json() == {"status": "down"}


def test_health_is_200_when_the_database_writes_and_keeps_no_probe_row(client, settings):
    from monitoring.models import HealthProbe

    settings.OVERLAP_HEALTH_NEEDS_WORKER = False
    for _ in range(2):  # the second probe is not stopped by the first one's row
        response = client.get("/healthz")
        assert response.status_code == 200, response.json()
        assert response.json()["checks"]["database"] == {
            "ok": True, "ms": response.json()["checks"]["database"]["ms"]}
    assert not HealthProbe.objects.exists()


@pytest.fixture
def grading_worker(transactional_db, django_db_blocker, settings, monkeypatch):
    """A real worker whose sandbox works (the process backend, allowed here)."""
    settings.OVERLAP_SANDBOX = "process"
    monkeypatch.setenv("OVERLAP_SANDBOX_ALLOW_PROCESS", "1")
    with django_db_blocker.unblock(), start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10,
        queues=["default"], hostname="grading@monitoring-tests",
    ) as running:
        yield running
    from monitoring import signals

    signals._worker_stops()


def _health_once_reported(client, hostname, configured):
    """/healthz once the worker's heartbeat carries its own sandbox report (a thread of
    the worker writes it just after start; an earlier test's worker had the same key)."""
    from monitoring.heartbeat import forget, workers_online

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for other in workers_online():  # an earlier test's worker, its key not yet expired
            if other["hostname"] != hostname:
                forget(hostname=other["hostname"], pid=other["pid"])
        mine = [w for w in workers_online() if w["hostname"] == hostname]
        if mine and (mine[0].get("sandbox_report") or {}).get("configured") == configured:
            break
        time.sleep(0.1)
    return client.get("/healthz")


def test_health_is_200_with_a_live_worker(client, grading_worker):
    response = _health_once_reported(client, grading_worker.hostname, "process")
    assert response.status_code == 200, response.json()
    report = response.json()
    assert report["checks"]["worker"]["workers"] == [grading_worker.hostname]
    assert "default" in report["checks"]["worker"]["queues"]


def test_health_is_503_when_the_only_worker_cannot_start_a_sandbox(client, worker):
    # The `worker` fixture's docker image does not exist: it cannot grade (it refuses work).
    response = _health_once_reported(client, worker.hostname, "docker")
    assert response.status_code == 503, response.json()
    error = response.json()["checks"]["worker"]["error"]
    assert worker.hostname in error and "no-such-image-for-monitoring-tests" in error


def test_health_is_503_when_redis_is_down(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True
    assert checks["redis"]["ok"] is False and "ConnectionError" in checks["redis"]["error"]


def test_a_worker_that_stopped_beating_expires(settings):
    settings.OVERLAP_WORKER_STALE_SECONDS = 1
    heartbeat.beat(hostname="gone@host", queues=["default"], pid=1)
    assert [w["hostname"] for w in heartbeat.workers_online()] == ["gone@host"]
    time.sleep(2.1)
    assert heartbeat.workers_online() == []


def test_liveness_needs_nothing_but_the_web_process(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    assert client.get("/healthz/live").status_code == 200


def test_metrics_from_this_machine_without_a_token(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert response["Content-Type"].startswith("text/plain; version=")
    for name in ("overlap_queue_depth", "overlap_click_to_verdict_seconds_bucket",
                 "overlap_workers_online", "overlap_sandbox_pool_ready",
                 "overlap_runs_active"):
        assert name in text, name


def test_metrics_refuse_other_hosts_and_proxied_requests(client):
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.5").status_code == 403
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 403


def test_metrics_with_a_token_need_exactly_that_token(client, settings):
    settings.OVERLAP_METRICS_TOKEN = "s3cret-scrape-token"
    assert client.get("/metrics").status_code == 403  # localhost is not enough now
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 403
    response = client.get("/metrics", REMOTE_ADDR="203.0.113.5",
                          HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert response.status_code == 200


def test_queue_depth_counts_waiting_tasks(client):
    before = _value(client.get("/metrics").content.decode(),
                    'overlap_queue_depth{queue="default"}')
    for _ in range(3):
        app.send_task("overlap.health", args=["waiting"], queue="default")
    after = _value(client.get("/metrics").content.decode(),
                   'overlap_queue_depth{queue="default"}')
    app.control.purge()
    assert after == before + 3


def test_a_finished_run_is_observed_once(client, live_session):
    from django.utils import timezone

    finished = timezone.now()
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n")
    Run.objects.filter(pk=run.pk).update(created_at=finished - timedelta(seconds=2.5))
    run.refresh_from_db()
    run.status, run.verdict, run.finished_at = Run.DONE, "accepted", finished
    run.save()
    run.save()  # saved again: still counted once
    text = client.get("/metrics").content.decode()
    assert _value(text, 'overlap_click_to_verdict_seconds_bucket{le="2",queue="default"}') == 0
    assert _value(text, 'overlap_click_to_verdict_seconds_bucket{le="3",queue="default"}') == 1
    assert _value(text, 'overlap_click_to_verdict_seconds_count{queue="default"}') == 1
    assert _value(text, 'overlap_click_to_verdict_seconds_sum{queue="default"}') == \
        pytest.approx(2.5, abs=0.01)
    assert _value(text, 'overlap_run_verdicts_total{verdict="accepted"}') == 1


def test_a_run_through_the_worker_is_observed_and_a_sandbox_failure_counted(
        client, staff_groups, live_session, grading_worker):
    from catalog.models import ExerciseVersion

    # The worker can grade, so it takes the run (a worker whose sandbox cannot run takes
    # none: test_worker_refuses_work.py); but this version's files cannot be written out
    # for its sandbox: a platform failure, never the candidate's.
    version = live_session.exercise_version
    ExerciseVersion.objects.filter(pk=version.pk).update(
        files={**version.files, "../outside-the-exercise.py": ""})
    response = client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
    assert response.status_code == 200
    run = live_session.runs.get()
    deadline = time.monotonic() + 30
    while run.status in Run.ACTIVE and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    assert run.status == Run.INTERNAL_ERROR, run.error
    assert "unsafe file name" in run.error
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = client.get("/metrics").content.decode()
        if _value(text, 'overlap_click_to_verdict_seconds_count{queue="default"}') == 1:
            break
        time.sleep(0.2)
    assert _value(text, 'overlap_click_to_verdict_seconds_count{queue="default"}') == 1
    assert _value(text, 'overlap_run_verdicts_total{verdict="internal_error"}') == 1
    assert _value(text, 'overlap_sandbox_failures_total{where="run"}') == 1
    assert _value(text, 'overlap_workers_online{queue="default"}') == 1


def test_the_status_page_is_for_superusers_only(client, worker):
    from django.contrib.auth.models import Group

    interviewer = User.objects.create_user("ada", password="correct horse battery")
    interviewer.groups.add(Group.objects.get_or_create(name="interviewers")[0])
    client.force_login(interviewer)
    assert client.get("/admin/status/").status_code == 403
    admin = User.objects.create_superuser("root", password="correct horse battery")
    superuser = Client()
    superuser.force_login(admin)
    response = superuser.get("/admin/status/")
    assert response.status_code == 200
    body = response.content.decode()
    assert worker.hostname in body
    assert "Queues and runs" in body and "GPU workers online" in body
    assert "no-such-image-for-monitoring-tests" in body or "not reported yet" in body


def test_metrics_say_redis_is_down_instead_of_failing(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/metrics")
    assert response.status_code == 200
    assert _value(response.content.decode(), "overlap_redis_up") == 0


@pytest.mark.slow
def test_a_real_warm_pool_shows_in_the_metrics(client, monkeypatch):
    from runner import sandbox
    from runner.sandbox.pool import start_pool, stop_pool

    backend = "bwrap" if sandbox.backend_problems().get("bwrap") is None else "process"
    monkeypatch.setenv("OVERLAP_SANDBOX_ALLOW_PROCESS", "1")
    pool = start_pool(backend, size=1)
    try:
        assert pool.wait_full(120), "the warm sandbox never became ready"
        heartbeat.beat(hostname="pool@host", queues=["default"])
        text = client.get("/metrics").content.decode()
        assert _value(text, "overlap_sandbox_pool_ready") == 1
        assert _value(text, "overlap_sandbox_pool_size") == 1
    finally:
        stop_pool()


def test_the_status_page_shows_gpu_workers_and_a_stale_image(client, settings):
    settings.OVERLAP_GPU = "all"
    stale = {"configured": "auto", "chosen": "docker", "problems": {"docker": None},
             "image": {"name": "overlap-sandbox:latest", "present": True, "fresh": False,
                       "runner_hash": "0123456789abcdef",
                       "expected_runner_hash": "fedcba9876543210"}}
    heartbeat.beat(hostname="gpu-1@box", queues=["gpu"], pid=7, sandbox=stale)
    admin = User.objects.create_superuser("root", password="correct horse battery")
    client.force_login(admin)
    body = client.get("/admin/status/").content.decode()
    assert "GPU workers online: gpu-1@box." in body
    assert "<strong>stale</strong> (built from 0123456789abcdef" in body


def test_health_answers_a_probe_by_address_whatever_allowed_hosts_says(client, settings):
    # The documented check (`curl http://127.0.0.1:8000/healthz`) with ALLOWED_HOSTS set to
    # the public name only, as the deploy docs say.
    settings.ALLOWED_HOSTS = ["interviews.example.org"]
    response = client.get("/healthz", HTTP_HOST="127.0.0.1:8000")
    assert response.status_code in (200, 503) and response.json()["status"] in ("ok", "down")
    assert client.get("/healthz/live", HTTP_HOST="10.0.0.5").status_code == 200
    # Every other page still refuses a host it does not serve.
    assert client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").status_code == 400


def test_metrics_answer_a_scrape_by_address_whatever_allowed_hosts_says(client, settings):
    # The documented scrape (`curl http://127.0.0.1:8000/metrics`) with ALLOWED_HOSTS set
    # to the public name only: answered like /healthz, its own check still applies.
    settings.ALLOWED_HOSTS = ["interviews.example.org"]
    by_address = client.get("/metrics", HTTP_HOST="127.0.0.1:8000")
    assert by_address.status_code == 200
    assert "overlap_queue_depth" in by_address.content.decode()
    assert client.get("/metrics", HTTP_HOST="10.0.0.5",
                      REMOTE_ADDR="203.0.113.5").status_code == 403
    settings.OVERLAP_METRICS_TOKEN = "s3cret-scrape-token"
    assert client.get("/metrics", HTTP_HOST="127.0.0.1:8000").status_code == 403
    scrape = client.get("/metrics", HTTP_HOST="172.17.0.1:8000", REMOTE_ADDR="172.17.0.1",
                        HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert scrape.status_code == 200
    # Every other page still refuses a host it does not serve.
    assert client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").status_code == 400


def test_public_health_says_up_or_down_and_names_no_host(client, settings):
    settings.OVERLAP_METRICS_TOKEN = "s3cret-token"
    public = client.get("/healthz", REMOTE_ADDR="198.51.100.4")
    assert set(public.json()) == {"status"}
    detailed = client.get("/healthz", REMOTE_ADDR="198.51.100.4",
                          HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert "checks" in detailed.json()


def test_health_is_down_when_every_worker_reports_it_cannot_run_a_sandbox(client):
    """A worker told to use docker whose image is missing beats like any other, but every
    run it takes fails: /healthz says so, naming the worker and the reason."""
    from monitoring.heartbeat import beat, forget

    broken = {"configured": "docker", "chosen": "",
              "problems": {"docker": "image overlap-sandbox:latest not found", "bwrap": None}}
    beat(hostname="broken-host", queues=["default"], pid=777, sandbox=broken)
    try:
        response = client.get("/healthz")
        assert response.status_code == 503
        worker = response.json()["checks"]["worker"]
        assert worker["ok"] is False
        assert "broken-host" in worker["error"] and "image overlap-sandbox:latest" in \
            worker["error"]
        # A second worker that can grade makes the site healthy again.
        beat(hostname="good-host", queues=["default"], pid=778,
             sandbox={"configured": "auto", "chosen": "bwrap", "problems": {}})
        assert client.get("/healthz").status_code == 200
    finally:
        forget(hostname="broken-host", pid=777)
        forget(hostname="good-host", pid=778)


GRADES = {"configured": "auto", "chosen": "bwrap", "problems": {}}


def test_health_is_down_while_no_worker_takes_candidates_runs(client):
    """An authors' worker (or a GPU worker) alone grades no candidate's Run: /healthz is
    503 and says which queue nobody takes, until a worker that can grade takes it."""
    from monitoring.heartbeat import beat, forget

    beat(hostname="authoring@host", queues=["authoring"], pid=779, sandbox=GRADES)
    beat(hostname="gpu@host", queues=["gpu"], pid=780, sandbox=GRADES)
    try:
        response = client.get("/healthz")
        assert response.status_code == 503, response.json()
        worker = response.json()["checks"]["worker"]
        assert worker["ok"] is False
        assert worker["workers"] == ["authoring@host", "gpu@host"]
        assert worker["queues"] == ["authoring", "gpu"]
        assert "no worker takes the default queue" in worker["error"]
        assert "authoring@host takes authoring" in worker["error"]
        beat(hostname="runs@host", queues=["default", "recovery"], pid=781, sandbox=GRADES)
        response = client.get("/healthz")
        assert response.status_code == 200, response.json()
        assert response.json()["checks"]["worker"]["ok"] is True
    finally:
        for host, pid in (("authoring@host", 779), ("gpu@host", 780), ("runs@host", 781)):
            forget(hostname=host, pid=pid)


def test_health_is_down_when_the_runs_worker_refuses_work_beside_a_working_one(client):
    """The candidates' worker refuses work (no sandbox it may use works) while the
    authors' worker can grade: nobody grades a Run, so the site is down, and says why."""
    from monitoring.heartbeat import beat, forget

    why = "no sandbox it may use works (daemon: no sandbox daemon socket)"
    beat(hostname="authoring@host", queues=["authoring"], pid=782, sandbox=GRADES)
    beat(hostname="runs@host", queues=["recovery"], pid=783,
         refusing={"queues": ["default"], "why": why})
    beat(hostname="runs@host", queues=["default", "recovery"], pid=784)  # a pool process
    try:
        response = client.get("/healthz")
        assert response.status_code == 503, response.json()
        worker = response.json()["checks"]["worker"]
        assert worker["ok"] is False
        assert worker["refusing"] == {"runs@host": why}
        assert worker["error"] == ("no worker can grade candidates' runs (default queue): "
                                   f"runs@host: {why}")
        # Anyone else learns only that the site is down.
        assert set(client.get("/healthz", REMOTE_ADDR="198.51.100.4").json()) == {"status"}
        # It takes work again: the site is up.
        beat(hostname="runs@host", queues=["default", "recovery"], pid=783, sandbox=GRADES)
        assert client.get("/healthz").status_code == 200
    finally:
        for host, pid in (("authoring@host", 782), ("runs@host", 783), ("runs@host", 784)):
            forget(hostname=host, pid=pid)
