"""The web server's requests share pooled PostgreSQL connections.

Under ASGI every request runs its synchronous code in a thread of its own and Django's
connections belong to a thread: with persistent connections alone, every request (each
poll of a running run's status, every 500 ms per candidate) opened a new PostgreSQL
connection — a server process — and left it open until it was garbage-collected.
overlap/asgi.py asks for a pool instead. Measured in a process of its own that serves
requests through the real ASGI application and counts the connections psycopg opens."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

SERVE_REQUESTS = r"""
import asyncio, json, os, sys
import psycopg
opened = []
original = psycopg.Connection.connect.__func__
def counting(cls, *args, **kwargs):
    opened.append(1)
    return original(cls, *args, **kwargs)
psycopg.Connection.connect = classmethod(counting)  # the pool's way
psycopg.connect = psycopg.Connection.connect  # Django's, without a pool
sys.path[:0] = [sys.argv[1]]
from asgiref.testing import ApplicationCommunicator
from overlap.asgi import application

async def request(path):
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80), "scheme": "http", "http_version": "1.1",
             "root_path": ""}
    talk = ApplicationCommunicator(application, scope)
    await talk.send_input({"type": "http.request", "body": b""})
    start = await talk.receive_output(10)
    await talk.receive_output(10)
    return start["status"]

async def main():
    # A candidate polling a run's status: a database lookup (here: a link that finds
    # no interview, 404) in every request.
    statuses = [await request(f"/c/no-such-link-{i}/runs/1/") for i in range(20)]
    print(json.dumps({"statuses": sorted(set(statuses)), "opened": len(opened)}))

asyncio.run(main())
"""


def _serve(pool: str | None) -> dict:
    settings = connection.settings_dict
    url = (f"postgres://{settings['USER'] or 'postgres'}@{settings['HOST'] or '127.0.0.1'}:"
           f"{settings['PORT'] or 5432}/{settings['NAME']}")
    env = {**os.environ, "DATABASE_URL": url, "ALLOWED_HOSTS": "127.0.0.1",
           "DJANGO_SETTINGS_MODULE": "overlap.settings"}
    env.pop("OVERLAP_DB_POOL", None)
    if pool is not None:
        env["OVERLAP_DB_POOL"] = pool
    done = subprocess.run([sys.executable, "-c", SERVE_REQUESTS, str(ROOT / "platform")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_twenty_requests_share_one_pooled_connection():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (DATABASE_URL): SQLite has no server connections")
    served = _serve(pool=None)  # what the ASGI entry point sets up
    assert served["statuses"] == [404]
    assert served["opened"] <= 2

    unpooled = _serve(pool="0")  # the same server without the pool: one per request
    assert unpooled["statuses"] == [404]
    assert unpooled["opened"] >= 20
