"""Candidate tokens never reach a log line, whichever server writes it; logs can be JSON
lines, and records written while a run executes carry its id."""

import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "sEcReTtOkEn_0123456789abcdefghijklmnopqrstuv"

pytestmark = pytest.mark.django_db


def test_a_404_on_a_candidate_url_logs_no_token(client, caplog):
    with caplog.at_level(logging.INFO):
        assert client.get(f"/c/{TOKEN}/").status_code == 404
        assert client.get(f"/c/{TOKEN}/run/").status_code == 405  # GET on a POST-only view
    assert TOKEN not in caplog.text
    assert "Not Found: /c/[token]/" in caplog.text
    assert "/c/[token]/run/" in caplog.text


def test_a_4xx_on_a_live_session_logs_no_token(client, live_session, caplog):
    with caplog.at_level(logging.INFO):
        assert client.get(f"/c/{live_session.token}/save/").status_code == 405
    assert live_session.token not in caplog.text
    assert "/c/[token]/save/" in caplog.text


@pytest.mark.parametrize("logger,fmt,args", [
    # uvicorn's access line: client, method, path, HTTP version, status
    ("uvicorn.access", '%s - "%s %s HTTP/%s" %d',
     ("10.0.0.1:5555", "GET", f"/c/{TOKEN}/state/?state=live", "1.1", 404)),
    # gunicorn formats its access line from a dict of atoms
    ("gunicorn.access", '%(h)s "%(r)s" %(s)s',
     {"h": "10.0.0.1", "r": f"POST /c/{TOKEN}/run/ HTTP/1.1", "s": "429"}),
])
def test_asgi_and_wsgi_server_access_lines_are_redacted(caplog, logger, fmt, args):
    with caplog.at_level(logging.INFO):
        if isinstance(args, tuple):
            logging.getLogger(logger).info(fmt, *args)
        else:
            logging.getLogger(logger).info(fmt, args)
    assert TOKEN not in caplog.text
    assert "/c/[token]/" in caplog.text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(**extra):
    """The environment of a server process started by a test: the test database (already
    migrated by pytest-django), never the configured one."""
    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.skip("starts a server process on the test database: needs PostgreSQL")
    env["DATABASE_URL"] = url.rsplit("/", 1)[0] + "/" + settings.DATABASES["default"]["NAME"]
    return {**env, "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
            "DJANGO_SETTINGS_MODULE": "overlap.settings", **extra}


@pytest.mark.slow
def test_the_development_servers_access_log_holds_no_token(tmp_path):
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT, env=_env(DEBUG="1", OVERLAP_VAR_DIR=str(tmp_path)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/c/{TOKEN}/", timeout=2)
            except urllib.error.HTTPError as error:
                assert error.code == 404
                break
            except OSError:
                assert time.monotonic() < deadline, "runserver did not start"
                time.sleep(0.3)
        time.sleep(0.5)
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=20)
    assert '"GET /c/[token]/ HTTP/1.1" 404' in output, output
    assert TOKEN not in output


def test_json_log_lines_carry_the_run_id_and_no_token(tmp_path):
    code = (
        "import django, logging; django.setup()\n"
        "from security.logs import run_logging_context\n"
        "with run_logging_context(42):\n"
        f"    logging.getLogger('runs.services').warning('graded /c/{TOKEN}/run/')\n"
        "logging.getLogger('runs.services').warning('outside')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60,
                            env=_env(DEBUG="1", LOG_FORMAT="json",
                                     OVERLAP_VAR_DIR=str(tmp_path)))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()
             if line.startswith("{") and "runs.services" in line]
    assert lines[0]["run_id"] == 42
    assert lines[0]["message"] == "graded /c/[token]/run/"
    assert lines[0]["level"] == "WARNING" and lines[0]["logger"] == "runs.services"
    assert lines[1]["run_id"] is None
    assert TOKEN not in result.stderr


def test_records_logged_by_the_run_task_carry_its_run_id(caplog):
    from celery.signals import task_postrun, task_prerun

    from runs.tasks import run_execute_task
    from security.logs import RunContext

    handler_filter = RunContext()
    with caplog.at_level(logging.INFO):
        task_prerun.send(sender=run_execute_task, task_id="t1", task=run_execute_task,
                         args=(), kwargs={"run_id": 987654})
        logging.getLogger("runner.sandbox").info("inside the run")
        task_postrun.send(sender=run_execute_task, task_id="t1", task=run_execute_task,
                          args=(), kwargs={"run_id": 987654}, retval=None, state="SUCCESS")
        logging.getLogger("runner.sandbox").info("after the run")
    inside, after = [r for r in caplog.records if r.name == "runner.sandbox"]
    handler_filter.filter(inside)
    handler_filter.filter(after)
    assert inside.run_id == 987654
    assert after.run_id is None


def test_json_lines_of_a_404_on_a_candidate_url_hold_no_token(tmp_path):
    """django.request attaches the request to its record; a JSON formatter that dumped
    every extra attribute would print '<WSGIRequest: GET /c/<token>/>'."""
    code = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "from django.test.utils import setup_test_environment\n"
        "setup_test_environment()\n"
        f"print(Client().get('/c/{TOKEN}/').status_code)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60,
                            env=_env(DEBUG="1", LOG_FORMAT="json", ALLOWED_HOSTS="testserver",
                                     OVERLAP_VAR_DIR=str(tmp_path)))
    assert result.stdout.strip().endswith("404"), result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    not_found = [line for line in lines if line["logger"] == "django.request"]
    assert not_found and not_found[0]["message"] == "Not Found: /c/[token]/"
    assert not_found[0]["status_code"] == 404
    assert TOKEN not in result.stderr


def test_a_traceback_naming_a_candidate_url_is_redacted(caplog):
    try:
        raise ValueError(f"could not save /c/{TOKEN}/save/")
    except ValueError:
        logging.getLogger("django.request").exception("Internal Server Error: /c/%s/", TOKEN)
    assert TOKEN not in caplog.text
    assert "could not save /c/[token]/save/" in caplog.text
