"""A database that cannot be reached: the ASGI application answers every page that needs
it with the 503 "temporarily unavailable, your work is kept" page within 2 s (a short
connection time-out and a short wait for a pooled connection), never a hang and never a
bare 500. Served in a process of its own through the real ASGI application, with
DATABASE_URL naming a PostgreSQL port where nothing listens."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVE = r"""
import asyncio, json, sys, time
sys.path[:0] = [sys.argv[1]]
from asgiref.testing import ApplicationCommunicator
from overlap.asgi import application

async def request(path):
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80), "scheme": "http", "http_version": "1.1",
             "root_path": ""}
    talk = ApplicationCommunicator(application, scope)
    started = time.monotonic()
    await talk.send_input({"type": "http.request", "body": b""})
    start = await talk.receive_output(30)
    body = await talk.receive_output(30)
    return {"status": start["status"], "took": time.monotonic() - started,
            "body": body.get("body", b"").decode(errors="replace")}

async def main():
    answers = [await request(path) for path in ("/c/some-link/", "/c/x/runs/1/", "/c/x/")]
    print(json.dumps(answers))

asyncio.run(main())
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again: connections to it are refused


@pytest.mark.parametrize("pool", ["1", "0"])
def test_pages_answer_a_clear_503_within_2_s_while_postgresql_is_down(pool):
    pytest.importorskip("psycopg")
    env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1", "DEBUG": "",
           "DJANGO_SETTINGS_MODULE": "overlap.settings", "OVERLAP_DB_POOL": pool,
           "DATABASE_URL": f"postgres://postgres@127.0.0.1:{_closed_port()}/overlap"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SERVE, str(ROOT / "platform")], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    for answer in answers:
        assert answer["status"] == 503, answer
        assert "temporarily unavailable" in answer["body"], answer["body"][:300]
        assert "your work is kept" in answer["body"]
        assert answer["took"] < 2, answer
    assert time.monotonic() - started < 60
