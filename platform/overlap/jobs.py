"""One lifecycle for background jobs (runs, and each file of an author's validation).

    queued --claim--> running --finish--> done | internal_error
      ^                  |
      +----- retry ------+  (its worker stopped beating; after max attempts: internal_error)

- enqueue: the row is committed first, then one message is sent (`send`, called from
  `transaction.on_commit`). The broker being down is reported at once (`BrokerUnavailable`,
  no 20 s of retries) so the caller can tell the person and not leave a row that blocks
  the next job. Every send stamps `last_enqueued_at`.
- claim: a guarded update (`queued -> running`, attempts + 1); a duplicate message finds
  nothing to claim and does nothing. So recovery may send a message again safely.
- running: the worker beats (`heartbeat_at`, every OVERLAP_JOB_HEARTBEAT_S) while it works;
  a row whose beat stopped for OVERLAP_JOB_DEAD_AFTER_S is dead (worker killed, machine
  gone), whatever the task's time limit.
- recover: Celery beat calls `overlap.recover` every OVERLAP_RECOVER_EVERY_S. A queued row
  whose last message is older than OVERLAP_RUN_REQUEUE_AFTER (lost with a Redis restart) is
  sent again — only when the broker's queue lacks its message, at most once per window,
  claimed by a guarded update of `last_enqueued_at`, so any number of beats or workers
  never flood the broker; a dead running row is retried
  or, after OVERLAP_RUN_MAX_ATTEMPTS, failed clearly.
"""

import contextlib
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

log = logging.getLogger(__name__)

# A publish is tried twice, quickly: a person is waiting for the answer.
FAST_PUBLISH = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2,
                "interval_max": 0.2}


class BrokerUnavailable(Exception):
    """The message could not be sent (Redis down); nothing will pick the job up now."""

    message = ("The grading service is unavailable right now (our side, not your code). "
               "Nothing was queued; try again in a minute.")


def lost_after() -> timedelta:
    return timedelta(seconds=settings.OVERLAP_RUN_REQUEUE_AFTER)


def dead_after() -> timedelta:
    return timedelta(seconds=settings.OVERLAP_JOB_DEAD_AFTER_S)


def send(task, model, pk: int, *, queue: str, time_limit: int | None = None,
         now=None) -> None:
    """Publish one message for job `pk` on `queue`; stamp the row's last_enqueued_at."""
    options = {"queue": queue, "retry_policy": FAST_PUBLISH}
    if time_limit:
        options.update(time_limit=time_limit, soft_time_limit=max(1, time_limit - 20))
    try:
        task.apply_async((pk,), **options)
    except Exception as exc:  # kombu/redis errors: the broker cannot be reached
        log.warning("%s %s: could not enqueue on %r: %s", model.__name__, pk, queue, exc)
        raise BrokerUnavailable(str(exc)) from exc
    model.objects.filter(pk=pk).update(last_enqueued_at=now or timezone.now())


def claim(queryset, **changes) -> bool:
    """A guarded update: True when exactly this caller moved the row."""
    return queryset.update(**changes) > 0


def waiting_messages(queue: str) -> int | None:
    """How many messages wait in the broker's `queue` (Redis: the list's length), or None
    when that cannot be told."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            return int(client.llen(queue))
        finally:
            client.close()
    except Exception:
        return None


def take_lost(queryset, *, now=None, queue: str | None = None) -> list[int]:
    """Queued rows (the caller's queryset) whose last message is older than the window; each
    returned id is stamped now by a guarded update, so only one caller re-sends it.

    With `queue`, rows whose messages are evidently still waiting there (a long queue, not a
    lost one) are left alone: only as many of the oldest rows are taken as the queue lacks
    messages for (Redis restarted empty: all of them)."""
    now = now or timezone.now()
    cutoff = now - lost_after()
    taken = []
    candidates = list(queryset.annotate(_sent=Coalesce("last_enqueued_at", "created_at"))
                      .filter(_sent__lt=cutoff).order_by("_sent")
                      .values_list("pk", "last_enqueued_at"))
    waiting = waiting_messages(queue) if queue and candidates else None
    if waiting is not None:
        candidates = candidates[:max(0, len(candidates) - waiting)]
    for pk, sent in candidates:
        guard = Q(last_enqueued_at__isnull=True) if sent is None else Q(last_enqueued_at=sent)
        if queryset.model.objects.filter(guard, pk=pk).update(last_enqueued_at=now):
            taken.append(pk)
    return taken


def requeue_lost(queryset, enqueue, *, now) -> tuple[int, bool]:
    """Re-send, queue by queue, the queued rows (the caller's queryset) whose message may
    be lost (``take_lost``): ``enqueue(row)`` for each. Returns how many were re-sent and
    whether the broker took them all (False: it is down, the next beat tries again)."""
    sent = 0
    for queue in queryset.values_list("queue", flat=True).distinct().order_by():
        lost = take_lost(queryset.filter(queue=queue), now=now, queue=queue)
        for row in queryset.model.objects.filter(pk__in=lost):
            try:
                enqueue(row)
            except BrokerUnavailable:
                return sent, False
            sent += 1
    return sent, True


def dead(queryset, *, now=None):
    """Running rows (the caller's queryset) whose worker stopped beating."""
    now = now or timezone.now()
    return queryset.annotate(_beat=Coalesce("heartbeat_at", "started_at")).filter(
        _beat__lt=now - dead_after())


def is_dead(row, *, now=None) -> bool:
    now = now or timezone.now()
    beat = row.heartbeat_at or row.started_at
    return beat is not None and beat < now - dead_after()


def is_lost(row, *, now=None) -> bool:
    now = now or timezone.now()
    return (row.last_enqueued_at or row.created_at) < now - lost_after()


@contextlib.contextmanager
def heartbeat(model, pk: int, *, running_status: str = "running"):
    """While the block runs, stamp the row's heartbeat_at every OVERLAP_JOB_HEARTBEAT_S (in a
    thread, with its own database connection). A killed worker stops beating."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.OVERLAP_JOB_HEARTBEAT_S):
                try:
                    model.objects.filter(pk=pk, status=running_status).update(
                        heartbeat_at=timezone.now())
                except Exception:
                    log.warning("%s %s: heartbeat failed", model.__name__, pk, exc_info=True)
                    close_old_connections()
        finally:
            connection.close()

    model.objects.filter(pk=pk).update(heartbeat_at=timezone.now())
    thread = threading.Thread(target=beat, name=f"heartbeat-{model.__name__}-{pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def attempts_left(row) -> bool:
    return row.attempts < settings.OVERLAP_RUN_MAX_ATTEMPTS


def bump_attempts():
    return F("attempts") + 1


def recover_all() -> dict[str, dict[str, int]]:
    """What Celery beat runs: every kind of job, recovered."""
    from authoring.services import validations_recover
    from runs.services import runs_recover

    return {"runs": runs_recover(), "validations": validations_recover()}
