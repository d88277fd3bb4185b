"""`make run` (RUN_ENV in the Makefile: a generated SECRET_KEY file, SQLite, DEBUG off, no
EMAIL_HOST): the console's "E-mail the invitation" succeeds and the message is printed to
the web server's output, as the README says, instead of "[Errno 111] Connection refused"
from an SMTP server nobody configured."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys, django
django.setup()
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from catalog.models import Exercise
from content.services import content_sync
from interviews import services
call_command("migrate", verbosity=0)
content_sync(root=settings.EXERCISES_DIR)
user = User.objects.create_user("ada", password="correct horse battery")
user.groups.add(Group.objects.get(name="interviewers"))
session = services.session_create(
    interviewer=user, exercise=Exercise.objects.get(slug="async-parameter-server"),
    candidate_name="Lin", candidate_email="lin@example.org")
client = Client()
client.force_login(user)
page = client.post(f"/sessions/{session.pk}/invite/", follow=True).content.decode()
session.refresh_from_db()
sys.stdout.flush()
print(json.dumps({"token": session.token, "invited": session.invited_at is not None,
                  "said": "Invitation e-mailed to lin@example.org" in page,
                  "refused": "could not be sent" in page}))
"""


@pytest.mark.slow
def test_the_invitation_reaches_the_console_under_make_run(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EMAIL_") and k not in ("DATABASE_URL", "SECRET_KEY", "DEBUG")}
    env.update(OVERLAP_VAR_DIR=str(tmp_path),  # what RUN_ENV sets, in a private var/
               OVERLAP_SECRET_KEY_FILE=str(tmp_path / "secret_key"),
               OVERLAP_DEMO_PASSWORD_FILE=str(tmp_path / "demo_password"),
               ALLOWED_HOSTS="testserver",
               PYTHONPATH=f"{ROOT / 'platform'}:{ROOT}",
               DJANGO_SETTINGS_MODULE="overlap.settings")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"token": report["token"], "invited": True, "said": True,
                      "refused": False}
    printed = done.stdout
    assert "Subject: Your interview: Asynchronous parameter server" in printed
    assert "To: lin@example.org" in printed
    assert f"http://testserver/c/{report['token']}/" in printed
    assert "Connection refused" not in printed + done.stderr
