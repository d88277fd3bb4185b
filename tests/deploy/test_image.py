"""The production image, end to end: built offline (docker/build.sh: debootstrap base,
wheels downloaded on the host, `pip install --no-index`), then its web (uvicorn) and a
worker (sandboxes through the engine's socket) run against this machine's PostgreSQL and
Redis with DEBUG off; a candidate plays a short session over HTTP and gets a verdict."""

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.parse
from pathlib import Path

import pytest

from ops.bench_live import RUN_ID, Browser
from tests.faults.harness import Database, free_port, port_open, wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.docker, pytest.mark.slow]
IMAGE = os.environ.get("OVERLAP_WEB_IMAGE", "overlap-web:test")


def _docker(*args: str, timeout: float = 300, check: bool = True) -> str:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def image():
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine answers")
    started = time.monotonic()
    build = subprocess.run(["sh", "docker/build.sh"], cwd=ROOT, capture_output=True, text=True,
                           timeout=1200, env={**os.environ, "OVERLAP_WEB_IMAGE": IMAGE,
                                              "PYTHON": sys.executable})
    assert build.returncode == 0, build.stderr[-4000:]
    print(f"docker/build.sh: {time.monotonic() - started:.0f} s")
    return IMAGE


def test_the_image_serves_a_session_and_grades_a_run_with_debug_off(image, tmp_path):
    db = Database(tmp_path)
    if not db.postgres:
        pytest.skip("the deployment test runs against PostgreSQL (DATABASE_URL)")
    from runner.sandbox.run import get_backend

    if get_backend("docker").problem():
        pytest.skip(f"docker sandbox unavailable: {get_backend('docker').problem()}")
    port = free_port()
    env = {
        "DATABASE_URL": db.url,
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "OVERLAP_SANDBOX_IMAGE": os.environ.get("OVERLAP_SANDBOX_IMAGE",
                                                "overlap-sandbox:latest"),
        "OVERLAP_SANDBOX_POOL_SIZE": "1",
        "HOST": "127.0.0.1", "PORT": str(port), "WEB_WORKERS": "1",
    }
    flags = ["--network", "host"]
    for key, value in env.items():
        flags += ["-e", f"{key}={value}"]
    names = [f"overlap-deploy-{os.getpid()}-{role}" for role in ("worker", "web", "sandboxd")]
    volume = f"overlap-deploy-{os.getpid()}-sandbox-socket"
    try:
        _docker("run", "--rm", *flags, image, "migrate", timeout=300)
        out = _docker("run", "--rm", *flags, image, "manage", "shell", "-c", (
            "from django.contrib.auth.models import Group, User\n"
            "from catalog.models import Exercise\n"
            "from interviews import services\n"
            "user = User.objects.create_user('lead', password='deploy-test-pass-1')\n"
            "user.groups.add(Group.objects.get(name='interviewers'))\n"
            "exercise = Exercise.objects.get(slug='async-parameter-server')\n"
            "s = services.session_create(interviewer=user, exercise=exercise,\n"
            "    candidate_name='Remote', candidate_email='r@example.org')\n"
            "services.session_start(session=s)\n"
            "print('SESSION', s.pk, s.token)\n"
            "import json\n"
            "print('CODE', json.dumps(exercise.current_version.files['solution.py']))\n"))
        session_pk, token = re.search(r"SESSION (\d+) (\S+)", out).groups()
        code = json.loads(re.search(r"CODE (.*)", out).group(1))
        # A worker machine as docs/deploy.md has it: the sandbox daemon alone holds the
        # Docker socket (no network); the worker is the image's user, without the socket.
        sock = "/run/overlap-sandbox/sandbox.sock"
        _docker("volume", "create", volume)
        _docker("run", "-d", "--name", names[2], "--network", "none", "--user", "0:0",
                "-v", "/var/run/docker.sock:/var/run/docker.sock",
                "-v", f"{volume}:/run/overlap-sandbox",
                "-e", f"OVERLAP_SANDBOX_SOCKET={sock}",
                "-e", f"OVERLAP_SANDBOX_IMAGE={env['OVERLAP_SANDBOX_IMAGE']}",
                "-e", "OVERLAP_SANDBOX_POOL_SIZE=1", image, "sandboxd")
        _docker("run", "-d", "--name", names[0], *flags,
                "-v", f"{volume}:/run/overlap-sandbox",
                "-e", "OVERLAP_SANDBOX=daemon", "-e", f"OVERLAP_SANDBOX_SOCKET={sock}",
                image, "worker")
        _docker("run", "-d", "--name", names[1], *flags, image, "web")
        assert wait_for(lambda: port_open(port), 60), _docker("logs", names[1], check=False)
        base = f"http://127.0.0.1:{port}"

        # DEBUG is off: an unknown page is a plain 404, never Django's debug page.
        try:
            Browser(base).get("/no-such-page/")
            raise AssertionError("expected a 404")
        except urllib.error.HTTPError as exc:
            body = exc.read().decode()
            assert exc.code == 404 and "Traceback" not in body and "DEBUG" not in body
        # Static files come from the image (whitenoise, hashed names).
        candidate = Browser(base)
        page = candidate.get(f"/c/{token}/")
        css = re.search(r'href="(/static/[^"]+\.css)"', page).group(1)
        assert len(candidate.get(css)) > 100

        # The candidate saves, then runs; the page's poll shows the verdict.
        candidate.post(f"/c/{token}/save/", {"code": code})
        html = candidate.post(f"/c/{token}/run/", {"code": code})
        run_id = RUN_ID.search(html).group(1)
        deadline = time.monotonic() + 180
        while "run-active" in html and time.monotonic() < deadline:
            time.sleep(0.5)
            html = candidate.get(f"/c/{token}/runs/{run_id}/")
        assert 'class="verdict"' in html, (html[:2000], _docker("logs", names[0], check=False),
                                           _docker("logs", names[2], check=False))
        assert "internal error" not in html.lower(), html[:2000]

        # The interviewer logs in and sees the run on the console.
        lead = Browser(base)
        lead.log_in("lead", "deploy-test-pass-1")
        console = lead.get(f"/sessions/{session_pk}/")
        assert "Remote" in console
        # Graded in the sandbox: the reference solution is accepted (on a machine so loaded
        # that it ran past the wall limit: timeout, still the grader's own verdict).
        status = db.rows(f"SELECT status, verdict FROM runs_run WHERE id = {int(run_id)}")
        assert status in ([("done", "accepted")], [("done", "timeout")]), status
        print(f"deployment test: run {run_id} {status[0]}")
    finally:
        daemon_id = _docker("ps", "-aq", "--no-trunc", "--filter", f"name={names[2]}",
                            check=False).strip()[:12]
        for name in names:
            _docker("rm", "-f", name, check=False)
        # The daemon's pool (owned by its container) goes with it.
        listed = _docker("ps", "-a", "--filter", "label=org.overlap.sandbox", "--format",
                         '{{.ID}} {{.Label "org.overlap.sandbox.owner"}}', check=False)
        for line in listed.splitlines():
            container, _, owner = line.partition(" ")
            if daemon_id and owner.startswith(daemon_id + "/"):
                _docker("rm", "-f", container, check=False)
        _docker("volume", "rm", "-f", volume, check=False)
        db.drop()
