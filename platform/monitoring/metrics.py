"""Prometheus metrics, gathered at scrape time from Redis and the database.

Runs finish in Celery workers, possibly on other hosts, so observations are not kept in
the web process's memory: observe_run_finished() adds them to counters in Redis, and
the /metrics view turns those (plus queue lengths, heartbeats and the database) into
Prometheus metric families through a custom collector.

    observe_run_finished(run)       once per run (idempotent), when it reached done /
                                    internal_error: click-to-verdict and verdict counts
    record_sandbox_failure(where)   a sandbox could not start / grade
"""

import logging

from django.conf import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from monitoring import heartbeat, store

log = logging.getLogger(__name__)

# Click-to-verdict: from the candidate's click (Run.created_at) to the stored verdict.
BUCKETS = (0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300)
QUEUES = ("default", "gpu")
# kombu's Redis transport keeps one list per queue and priority step.
PRIORITY_SEPARATOR = "\x06\x16"
OBSERVED_TTL_S = 7 * 24 * 3600


def _bucket_label(bound: float) -> str:
    return f"{bound:g}"


def observe_run_finished(run) -> bool:
    """Count a finished run once: its click-to-verdict time and its verdict. Returns False
    when the run is not finished or was already counted."""
    if run.status not in ("done", "internal_error") or not run.finished_at:
        return False
    client = store.client()
    if not client.set(store.key("observed", str(run.pk)), 1, nx=True, ex=OBSERVED_TTL_S):
        return False
    seconds = max(0.0, (run.finished_at - run.created_at).total_seconds())
    verdict = run.verdict or run.status
    pipe = client.pipeline()
    for bound in BUCKETS:
        if seconds <= bound:
            pipe.hincrby(store.key("click_to_verdict", run.queue), _bucket_label(bound), 1)
    pipe.hincrby(store.key("click_to_verdict", run.queue), "+Inf", 1)
    pipe.hincrbyfloat(store.key("click_to_verdict_sum"), run.queue, seconds)
    pipe.hincrby(store.key("verdicts"), verdict, 1)
    if run.status == "internal_error":
        pipe.hincrby(store.key("sandbox_failures"), "run", 1)
    pipe.execute()
    return True


def record_sandbox_failure(where: str) -> None:
    try:
        store.client().hincrby(store.key("sandbox_failures"), where, 1)
    except Exception as exc:
        log.warning("could not count a sandbox failure: %s", exc)


def queue_depths() -> dict[str, int]:
    client = store.client()
    depths = {}
    for queue in QUEUES:
        names = [queue] + [f"{queue}{PRIORITY_SEPARATOR}{step}" for step in (3, 6, 9)]
        pipe = client.pipeline()
        for name in names:
            pipe.llen(name)
        depths[queue] = sum(pipe.execute())
    return depths


class OverlapCollector:
    def collect(self):
        up = GaugeMetricFamily("overlap_redis_up", "Whether Redis answered this scrape")
        try:
            store.client().ping()
        except Exception as exc:
            log.warning("metrics: Redis is down: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from self._from_redis(store.client())
        yield from self._from_database()

    def _from_redis(self, client):
        depth = GaugeMetricFamily("overlap_queue_depth",
                                  "Tasks waiting in each Celery queue", labels=["queue"])
        for queue, length in queue_depths().items():
            depth.add_metric([queue], length)
        yield depth

        sums = client.hgetall(store.key("click_to_verdict_sum"))
        histogram = HistogramMetricFamily(
            "overlap_click_to_verdict_seconds",
            "From the candidate's run click to the stored verdict", labels=["queue"])
        for queue in QUEUES:
            counts = client.hgetall(store.key("click_to_verdict", queue))
            buckets = [(_bucket_label(b), int(counts.get(_bucket_label(b), 0)))
                       for b in BUCKETS] + [("+Inf", int(counts.get("+Inf", 0)))]
            histogram.add_metric([queue], buckets, float(sums.get(queue, 0.0)))
        yield histogram

        verdicts = CounterMetricFamily("overlap_run_verdicts",
                                       "Finished runs by verdict", labels=["verdict"])
        for verdict, count in sorted(client.hgetall(store.key("verdicts")).items()):
            verdicts.add_metric([verdict], int(count))
        yield verdicts

        failures = CounterMetricFamily(
            "overlap_sandbox_failures",
            "Sandbox failures: runs ending in internal_error, pool start failures",
            labels=["where"])
        for where, count in sorted(client.hgetall(store.key("sandbox_failures")).items()):
            failures.add_metric([where], int(count))
        yield failures

        workers = heartbeat.workers_online()
        online = GaugeMetricFamily("overlap_workers_online",
                                   "Celery workers with a fresh heartbeat that take the queue "
                                   "(not one that refuses it: its sandbox cannot run)",
                                   labels=["queue"])
        serving = heartbeat.serving(workers)
        for queue in QUEUES:
            online.add_metric([queue], sum(queue in queues for queues in serving.values()))
        yield online

        pool = GaugeMetricFamily("overlap_sandbox_pool_ready",
                                 "Warm sandboxes ready, over all workers")
        pool.add_metric([], sum(w.get("pool", {}).get("ready", 0) for w in workers))
        yield pool
        wanted = GaugeMetricFamily("overlap_sandbox_pool_size",
                                   "Warm sandboxes wanted, over all workers")
        wanted.add_metric([], sum(w.get("pool", {}).get("size", 0) for w in workers))
        yield wanted

    def _from_database(self):
        from runs.models import Run

        active = GaugeMetricFamily("overlap_runs_active", "Runs queued or running",
                                   labels=["status"])
        for status in Run.ACTIVE:
            active.add_metric([status], Run.objects.filter(status=status).count())
        yield active


def render() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(OverlapCollector())
    return generate_latest(registry)


def metrics_allowed(request) -> bool:
    """With OVERLAP_METRICS_TOKEN set: only `Authorization: Bearer <token>`. Without:
    only from this machine, and not through a proxy (a proxy on this machine forwards
    everyone's requests from 127.0.0.1, adding X-Forwarded-For)."""
    import hmac

    token = settings.OVERLAP_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
    proxied = "HTTP_X_FORWARDED_FOR" in request.META or "HTTP_FORWARDED" in request.META
    return not proxied and request.META.get("REMOTE_ADDR") in {"127.0.0.1", "::1"}
