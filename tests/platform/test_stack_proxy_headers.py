"""`make run`'s web server takes the client's address from the socket, never from a header
the client wrote: uvicorn, started with the stack's own options, serves a probe app and
is asked with a forged X-Forwarded-For from loopback (where uvicorn trusts proxies by
default)."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ops.stack import UVICORN_OPTIONS

PROBE = '''
async def app(scope, receive, send):
    body = repr(scope.get("client")).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_forged_forwarded_for_does_not_become_the_client_address(tmp_path: Path):
    (tmp_path / "probe_app.py").write_text(PROBE)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "probe_app:app", "--host", "127.0.0.1",
         "--port", str(port), *UVICORN_OPTIONS],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/", headers={"X-Forwarded-For": "203.0.113.7"})
                with urllib.request.urlopen(request, timeout=2) as response:
                    client = response.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "203.0.113.7" not in client
    assert "127.0.0.1" in client, json.dumps(client)
