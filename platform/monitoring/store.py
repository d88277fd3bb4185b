"""The Redis connection monitoring data lives in (the Celery broker's Redis).

Workers on other hosts write heartbeats and run observations here; the web process that
serves /healthz and /metrics reads them, so nothing depends on which process saw what.
"""

import functools
import os

import redis
from django.conf import settings

PREFIX = "overlap:monitor:"
SOCKET_TIMEOUT_S = 2.0


@functools.cache
def _client(url: str, pid: int) -> redis.Redis:  # one per process: never shared over fork
    return redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_S,
                                socket_connect_timeout=SOCKET_TIMEOUT_S,
                                decode_responses=True)


def client() -> redis.Redis:
    return _client(settings.REDIS_URL, os.getpid())


def key(*parts: str) -> str:
    return PREFIX + ":".join(parts)
