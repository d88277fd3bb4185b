"""The documented compose stack, as an operator runs it: docker/compose.yaml with a
docker/.env and docker/overlap.env as docs/deploy.md says, behind Caddy (`tls internal`),
played over HTTPS and WSS; then the documented backup, a fresh stack restored from it,
and an upgrade with a live session.

No registry is reachable here: the postgres and redis images the file names are stand-ins
built from Debian's packages (tests/deploy/standins, selected with POSTGRES_IMAGE and
REDIS_IMAGE, which compose.yaml reads); the web image is docker/build.sh's offline build.
Needs a compose (the `docker compose` plugin, or Debian's docker-compose) and Caddy."""

import contextlib
import http.cookiejar
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ops.bench_live import RUN_ID, Browser
from tests.deploy.test_image import image  # noqa: F401  (the fixture: the built web image)
from tests.faults.harness import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
STANDINS = Path(__file__).resolve().parent / "standins"
pytestmark = [pytest.mark.docker, pytest.mark.slow]
SANDBOX_IMAGE = os.environ.get("OVERLAP_SANDBOX_IMAGE", "overlap-sandbox:latest")


def _compose_command() -> list[str] | None:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    found = shutil.which("docker-compose")
    return [found] if found else None


def _run(argv, *, timeout=300, check=True, stdin=None, cwd=None) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, timeout=timeout, input=stdin, cwd=cwd)
    if check:
        assert result.returncode == 0, (argv, result.stdout[-3000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def standins():
    for name in ("postgres", "redis"):
        _run(["docker", "build", "-q", "-t", f"overlap-standin/{name}:test",
              str(STANDINS / name)], timeout=900)


class Deployment:
    """One server's folder: compose.yaml, .env and overlap.env, as docs/deploy.md has them."""

    def __init__(self, folder: Path, project: str, web_image: str, http_port: int,
                 public_port: int, passwords: dict):
        self.folder, self.project = folder, project
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "docker" / "compose.yaml", folder / "compose.yaml")
        (folder / ".env").write_text(
            f"COMPOSE_PROJECT_NAME={project}\n"
            f"POSTGRES_PASSWORD={passwords['postgres']}\n"
            f"REDIS_PASSWORD={passwords['redis']}\n"
            f"OVERLAP_HTTP_BIND=127.0.0.1\nOVERLAP_HTTP_PORT={http_port}\n"
            f"OVERLAP_WEB_IMAGE={web_image}\n"
            "POSTGRES_IMAGE=overlap-standin/postgres:test\n"
            "REDIS_IMAGE=overlap-standin/redis:test\n"
            f"OVERLAP_SANDBOX_IMAGE={SANDBOX_IMAGE}\n"
        )
        (folder / "overlap.env").write_text(
            "ALLOWED_HOSTS=localhost\n"
            f"CSRF_TRUSTED_ORIGINS=https://localhost:{public_port}\n"
            "BEHIND_TLS=1\n"
            f"OVERLAP_METRICS_TOKEN={passwords['metrics']}\n"
            "OVERLAP_SANDBOX_POOL_SIZE=1\nWEB_WORKERS=1\nLOG_LEVEL=WARNING\n"
        )

    def use_image(self, web_image: str) -> None:
        env = self.folder / ".env"
        env.write_text(re.sub(r"(?m)^OVERLAP_WEB_IMAGE=.*$", f"OVERLAP_WEB_IMAGE={web_image}",
                              env.read_text()))

    def compose(self, *args: str, timeout=600, check=True, stdin=None):
        return _run([*_compose_command(), "-f", str(self.folder / "compose.yaml"), *args],
                    timeout=timeout, check=check, stdin=stdin, cwd=self.folder)

    def down(self) -> None:
        workers = self.compose("ps", "-q", "sandboxd", "authoring-sandboxd", check=False)
        hostnames = [line[:12] for line in workers.stdout.decode().split() if line]
        self.compose("down", "-v", "--remove-orphans", "-t", "20", timeout=180, check=False)
        # Sandboxes a daemon stopped mid-way left behind (their owner is the daemon's
        # container): never left for the next test to find.
        listed = _run(["docker", "ps", "-a", "--filter", "label=org.overlap.sandbox",
                       "--format", '{{.ID}} {{.Label "org.overlap.sandbox.owner"}}'],
                      check=False).stdout.decode().splitlines()
        for line in listed:
            container, _, owner = line.partition(" ")
            if any(owner.startswith(name + "/") or owner == name for name in hostnames):
                _run(["docker", "rm", "-f", container], check=False)


class Caddy:
    """Debian's Caddy in front of the web, `tls internal` (its own CA, trusted here)."""

    def __init__(self, folder: Path, public_port: int, http_port: int):
        self.folder, self.port = folder, public_port
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "Caddyfile").write_text(
            "{\n  admin off\n  skip_install_trust\n  auto_https disable_redirects\n}\n"
            f"https://localhost:{public_port} {{\n  tls internal\n"
            f"  reverse_proxy 127.0.0.1:{http_port}\n}}\n")
        env = {**os.environ, "XDG_DATA_HOME": str(folder / "data"),
               "XDG_CONFIG_HOME": str(folder / "config"), "HOME": str(folder)}
        self.process = subprocess.Popen(
            [shutil.which("caddy"), "run", "--config", str(folder / "Caddyfile"),
             "--adapter", "caddyfile"], env=env, stdout=subprocess.DEVNULL,
            stderr=open(folder / "caddy.log", "wb"))  # noqa: SIM115
        self.root = folder / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"

    def context(self) -> ssl.SSLContext:
        assert wait_for(self.root.exists, 30), (self.folder / "caddy.log").read_text()[-2000:]
        return ssl.create_default_context(cafile=str(self.root))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


class TlsBrowser(Browser):
    def __init__(self, base: str, context: ssl.SSLContext):
        super().__init__(base)
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar),
            urllib.request.HTTPSHandler(context=context))

    def status(self, path: str, headers: dict | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def _type(url: str, origin: str, context: ssl.SSLContext, text: str) -> None:
    """One keystroke's worth of text at the end of the pad, over WSS; returns once the
    server acknowledged it."""
    from websockets.sync.client import connect

    from tests.faults.outage import _length_after

    with connect(url, origin=origin, ssl=context, open_timeout=10) as ws:
        hello = json.loads(ws.recv(timeout=10))
        assert hello["type"] == "hello", hello
        version = hello["version"] + len(hello["updates"])
        length = len(hello["doc"])
        for update in hello["updates"]:
            length = _length_after(update["changes"])
        ws.send(json.dumps({"type": "push", "version": version, "updates": [
            {"clientID": "deploy", "changes": [length, [0, text]] if length else [[0, text]]}]}))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = json.loads(ws.recv(timeout=10))
            if message.get("type") == "updates" and message.get("pushed"):
                return
        raise AssertionError("the keystroke was never acknowledged")


SETUP = (
    "from django.contrib.auth.models import Group, User\n"
    "from catalog.models import Exercise\n"
    "from interviews import services\n"
    "user = User.objects.create_user('lead', password='deploy-test-pass-1')\n"
    "user.groups.add(Group.objects.get(name='interviewers'))\n"
    "exercise = Exercise.objects.get(slug='async-parameter-server')\n"
    "s = services.session_create(interviewer=user, exercise=exercise,\n"
    "    candidate_name='Remote', candidate_email='r@example.org')\n"
    "services.session_start(session=s)\n"
    "import json\n"
    "print('SESSION', s.pk, s.token)\n"
    "print('CODE', json.dumps(exercise.current_version.files['solution.py']))\n"
    # An author publishes a version of the exercise in the browser (what publishing
    # stores: a new current version and its Publication).
    "import pathlib, shutil, tempfile\n"
    "from authoring.models import Publication\n"
    "from catalog.services import exercise_store\n"
    "from content.folders import read_exercise\n"
    "root = pathlib.Path(tempfile.mkdtemp())\n"
    "shutil.copytree('/app/exercises/async-parameter-server', root / 'async-parameter-server')\n"
    "starter = root / 'async-parameter-server' / 'starter.py'\n"
    "starter.write_text(starter.read_text() + '# the author said so\\n')\n"
    "problems = []\n"
    "folder = read_exercise(root / 'async-parameter-server', root, problems)\n"
    "assert not problems, problems\n"
    "from django.db import transaction\n"
    "with transaction.atomic():\n"
    "    exercise_store(folder=folder)\n"
    "version = Exercise.objects.get(slug='async-parameter-server').current_version\n"
    "Publication.objects.create(version=version, published_by=user)\n"
    "print('AUTHOR', version.number)\n"
)

AUTHORS_VERSION = (
    "from catalog.models import Exercise\n"
    "version = Exercise.objects.get(slug='async-parameter-server').current_version\n"
    "print('CURRENT', version.number, '# the author said so' in version.files['starter.py'])\n"
)


PAD_TEXT = (
    "from interviews.models import InterviewSession\n"
    "print(InterviewSession.objects.get(pk={pk}).pad_text)\n"
)


class Outage(threading.Thread):
    """Asks /healthz (with the metrics token: the details) every 0.1 s until stopped: the
    longest run of failed answers, the longest the web gave no answer at all (502/504,
    refused), and which checks failed, so a long outage says what it waited for."""

    def __init__(self, browser: TlsBrowser, token: str):
        super().__init__(daemon=True)
        self.browser, self.done = browser, threading.Event()
        self.headers = {"Authorization": f"Bearer {token}"}
        self.longest, self.failing_since = 0.0, None
        self.unanswered, self.silent_since = 0.0, None
        self.failed: dict[str, float] = {}  # check -> first seen failing, from the start
        self.started = time.monotonic()
        self.start()

    def run(self) -> None:
        while not self.done.is_set():
            now = time.monotonic()
            try:
                status, body = self.browser.status("/healthz", self.headers)
            except OSError:
                status, body = 0, ""
            answered = status in (200, 503)
            if answered and self.silent_since is not None:
                self.unanswered = max(self.unanswered, now - self.silent_since)
                self.silent_since = None
            elif not answered and self.silent_since is None:
                self.silent_since = now
            if status == 200:
                if self.failing_since is not None:
                    self.longest = max(self.longest, now - self.failing_since)
                self.failing_since = None
            else:
                if self.failing_since is None:
                    self.failing_since = now
                self._note(status, body, now)
            time.sleep(0.1)

    def _note(self, status: int, body: str, now: float) -> None:
        names = [f"http {status}"]
        with contextlib.suppress(ValueError, AttributeError):
            checks = json.loads(body).get("checks", {})
            names = [name for name, check in checks.items() if not check.get("ok")]
        for name in names:
            self.failed.setdefault(name, round(now - self.started, 1))

    def stop(self) -> float:
        self.done.set()
        self.join(timeout=10)
        return self.longest


def _healthy(browser: TlsBrowser) -> bool:
    try:
        return browser.status("/healthz")[0] == 200
    except OSError:
        return False


def _verdict(candidate: TlsBrowser, token: str, code: str) -> str:
    candidate.get(f"/c/{token}/")  # the page sets the CSRF cookie the posts send back
    candidate.post(f"/c/{token}/save/", {"code": code})
    html = candidate.post(f"/c/{token}/run/", {"code": code})
    run_id = RUN_ID.search(html).group(1)
    deadline = time.monotonic() + 240
    while "run-active" in html and time.monotonic() < deadline:
        time.sleep(0.5)
        html = candidate.get(f"/c/{token}/runs/{run_id}/")
    match = re.search(r'class="verdict"[^>]*>([^<]+)<', html)
    assert match, html[:3000]
    return match.group(1).strip()


# Run inside the worker container: everything an attacker who owns it would try first.
WORKER_REACH = r"""
import json, os, socket
import docker
from runner.sandbox.daemon import job_request, recv_frame, send_frame
from runner.sandbox.job import script_job
from runner.sandbox.limits import Limits

status = open("/proc/self/status").read().splitlines()
seen = {"uid": os.getuid(), "euid": os.geteuid(),
        "docker_socket": os.path.exists("/var/run/docker.sock"),
        "capabilities": [l.split()[1] for l in status if l.startswith("CapEff")][0],
        "docker_api": {}}
for url in ("unix:///var/run/docker.sock", "unix:///run/overlap-sandbox/sandbox.sock",
            "unix:///run/overlap-sandbox/authoring.sock", "tcp://172.17.0.1:2375"):
    try:
        client = docker.DockerClient(base_url=url, timeout=5)
        client.containers.run("overlap-sandbox:latest", "true", remove=True,
                              volumes={"/": {"bind": "/host", "mode": "rw"}})
        seen["docker_api"][url] = "STARTED"
    except Exception as exc:
        seen["docker_api"][url] = type(exc).__name__
request = job_request(script_job("print(1)", Limits()), None)
request["job"]["mounts"] = [{"source": "/", "target": "/host", "type": "bind"}]
with socket.socket(socket.AF_UNIX) as conn:
    conn.connect("/run/overlap-sandbox/sandbox.sock")
    send_frame(conn, request)
    import time
    seen["daemon"] = recv_frame(conn, 1 << 20, time.monotonic() + 30)
print(json.dumps(seen))
"""


def test_the_documented_stack_behind_caddy_serves_backs_up_restores_and_upgrades(
        image, standins, tmp_path):  # noqa: F811
    if _compose_command() is None:
        pytest.skip("no compose (docker compose plugin or docker-compose) is installed")
    if not shutil.which("caddy"):
        pytest.skip("Caddy is not installed (apt-get install caddy)")
    from runner.sandbox.run import get_backend

    if get_backend("docker").problem():
        pytest.skip(f"docker sandbox unavailable: {get_backend('docker').problem()}")
    passwords = {name: secrets.token_hex(12) for name in ("postgres", "redis", "metrics")}
    http_port, public_port = free_port(), free_port()
    project = f"overlapdeploy{os.getpid()}"
    first = Deployment(tmp_path / "server-a", project, image, http_port, public_port, passwords)
    caddy = Caddy(tmp_path / "caddy", public_port, http_port)
    second = None
    figures = {}
    try:
        started = time.monotonic()
        first.compose("up", "-d", timeout=900)
        context = caddy.context()
        base = f"https://localhost:{public_port}"
        probe = TlsBrowser(base, context)
        assert wait_for(lambda: _healthy(probe), 240), first.compose(
            "logs", "--tail", "80", check=False).stdout[-4000:]
        figures["up"] = time.monotonic() - started

        # Health and metrics as the docs say: public up/down, details behind the token.
        status, body = probe.status("/healthz")
        assert status == 200, body
        assert probe.status("/metrics")[0] == 403
        status, metrics = probe.status(
            "/metrics", {"Authorization": f"Bearer {passwords['metrics']}"})
        assert status == 200 and "overlap_" in metrics, metrics[:500]

        out = first.compose("run", "--rm", "--no-deps", "-T", "web", "manage", "shell", "-c",
                            SETUP).stdout.decode()
        session_pk, token = re.search(r"SESSION (\d+) (\S+)", out).groups()
        authors = re.search(r"AUTHOR (\d+)", out).group(1)
        code = json.loads(re.search(r"CODE (.*)", out).group(1))

        # The interviewer logs in over HTTPS; the candidate types over WSS and runs.
        lead = TlsBrowser(base, context)
        lead.log_in("lead", "deploy-test-pass-1")
        assert "Remote" in lead.get(f"/sessions/{session_pk}/")
        origin = f"https://localhost:{public_port}"
        _type(f"wss://localhost:{public_port}/ws/c/{token}/", origin, context, "# typed\n")
        candidate = TlsBrowser(base, context)
        assert _verdict(candidate, token, code) == "Accepted"

        # That verdict came through the sandbox daemon: the worker is not root, holds no
        # Docker socket, and cannot start a container that mounts the host's `/`.
        reach = first.compose("exec", "-T", "worker", "python", "-c", WORKER_REACH,
                              check=False)
        assert reach.returncode == 0, reach.stdout[-3000:]
        seen = json.loads(reach.stdout.decode().strip().splitlines()[-1])
        assert seen["uid"] != 0 and seen["euid"] != 0 and not seen["docker_socket"], seen
        assert seen["capabilities"] == "0000000000000000", seen
        assert not any(value == "STARTED" for value in seen["docker_api"].values()), seen
        assert seen["daemon"] == {"ok": False, "refused": "a job takes no 'mounts'"}, seen

        # Backup, exactly as documented.
        dump = first.compose("exec", "-T", "postgres", "pg_dump", "-U", "overlap", "-Fc",
                             "overlap").stdout
        key = first.compose("exec", "-T", "web", "cat", "/app/var/secret_key").stdout
        assert len(dump) > 10_000 and len(key.strip()) >= 50

        # A fresh server (other volumes) restored from it, as documented.
        first.compose("stop", "-t", "10", timeout=180)
        second = Deployment(tmp_path / "server-b", project + "b", image, http_port,
                            public_port, passwords)
        started = time.monotonic()
        second.compose("up", "-d", "postgres", "redis", timeout=300)
        assert wait_for(lambda: second.compose(
            "exec", "-T", "postgres", "pg_isready", "-U", "overlap", check=False
        ).returncode == 0, 120)
        second.compose("exec", "-T", "postgres", "pg_restore", "-U", "overlap", "-d",
                       "overlap", "--clean", "--if-exists", "--no-owner", stdin=dump,
                       check=False)  # pg_restore warns about what it could not drop
        second.compose("run", "--rm", "--no-deps", "-T", "--entrypoint", "sh", "migrate",
                       "-c", "umask 077 && cat > /app/var/secret_key", stdin=key)
        second.compose("up", "-d", timeout=900)
        assert wait_for(lambda: _healthy(probe), 240), second.compose(
            "logs", "--tail", "80", check=False).stdout[-4000:]
        figures["restore"] = time.monotonic() - started
        # The interviewer's login (signed with the restored key) still holds; the
        # session, its run and the candidate's link are there.
        console = lead.get(f"/sessions/{session_pk}/")
        assert "Remote" in console and "Log in" not in console[:3000]
        assert "Accepted" in candidate.get(f"/c/{token}/")
        # `compose up` ran migrate and sync_content over the restored database: the
        # author's version is still the current one.
        current = second.compose("run", "--rm", "--no-deps", "-T", "web", "manage", "shell",
                                 "-c", AUTHORS_VERSION).stdout.decode()
        assert f"CURRENT {authors} True" in current, current[-2000:]

        # An upgrade with the session live, as documented: a new image (here the same one
        # under a new tag, so compose sees a changed service), then `compose up -d`, which
        # re-creates every service of the image (migrate first) and leaves PostgreSQL and
        # Redis running. What was typed before is kept; the candidate types again after.
        _type(f"wss://localhost:{public_port}/ws/c/{token}/", origin, context, "# before\n")
        upgraded = f"{image}-upgrade"
        _run(["docker", "tag", image, upgraded])
        second.use_image(upgraded)
        started = time.monotonic()
        watch = Outage(probe, passwords["metrics"])
        second.compose("up", "-d", timeout=600)
        assert wait_for(lambda: _healthy(probe), 240)
        figures["upgrade_outage"] = watch.stop()
        figures["upgrade_unanswered"] = watch.unanswered
        print(f"upgrade: checks that failed (first seen, s): {watch.failed}")
        _type(f"wss://localhost:{public_port}/ws/c/{token}/", origin, context, "# after\n")
        text = second.compose("run", "--rm", "--no-deps", "-T", "web", "manage", "shell",
                              "-c", PAD_TEXT.format(pk=int(session_pk))).stdout.decode()
        assert "# before" in text and "# after" in text, text[-2000:]
        figures["upgrade"] = time.monotonic() - started
        print("compose stack: " + ", ".join(f"{k} {v:.1f} s" for k, v in figures.items()))
    finally:
        caddy.stop()
        for deployment in (first, second):
            if deployment is not None:
                deployment.down()
        _run(["docker", "rmi", f"{image}-upgrade"], check=False)  # the tag only
