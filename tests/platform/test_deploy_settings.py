"""Production settings: HTTPS behind a TLS proxy, secure cookies, a strong SECRET_KEY, and
`manage.py check --deploy` with nothing to warn about."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = "k9Qz-7rT2_vLx4Wm8NbE5cYp1HfGa3Ds6JuKo0Ri2ZlVw8XeTq4Mn"
PRODUCTION = {"DEBUG": "0", "BEHIND_TLS": "1", "SECRET_KEY": STRONG_KEY,
              "ALLOWED_HOSTS": "overlap.example.org", "DATABASE_URL": "sqlite:///:memory:",
              "EMAIL_HOST": "smtp.example.org"}


def _run(argv, **env):
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
            "DJANGO_SETTINGS_MODULE": "overlap.settings", "LOG_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          env={**base, **env}, cwd=ROOT, timeout=120)


def _setting(name: str, **env) -> str:
    result = _run(["-c", "import django; django.setup(); from django.conf import settings; "
                         f"print(repr(settings.{name}))"], **env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_deploy_check_with_production_settings_has_no_warnings():
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNING" not in result.stderr.upper().replace("LOG_LEVEL", "")


def test_deploy_check_names_a_missing_mail_server():
    """Invitations are only printed without EMAIL_HOST: the deploy check tells the operator."""
    env = {k: v for k, v in PRODUCTION.items() if k != "EMAIL_HOST"}
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **env)
    assert result.returncode != 0
    assert "mail.E001" in result.stdout + result.stderr


def test_deploy_check_warns_without_tls():
    """The check above can fail: without BEHIND_TLS, HTTPS settings are off and it says so."""
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                  **{**PRODUCTION, "BEHIND_TLS": "0"})
    assert result.returncode != 0
    assert "security.W004" in result.stderr  # no HSTS
    assert "security.W008" in result.stderr  # no SSL redirect


def test_deploy_check_in_the_image_without_node_modules_has_no_warnings(tmp_path):
    """The production image holds the collected static files, not node_modules/ or
    static-build/ (docker/Dockerfile, Dockerfile.online): the folders that are not there
    are left out of STATICFILES_DIRS, so `check --deploy` there warns of nothing
    (staticfiles.W004)."""
    app = tmp_path / "app"  # the image's /app: its own sources, no front-end folders
    shutil.copytree(ROOT / "platform", app / "platform",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "manage.py", app / "manage.py")
    for shared in ("runner", "templates"):
        (app / shared).symlink_to(ROOT / shared)
    assert not (app / "node_modules").exists() and not (app / "static-build").exists()
    env = {"PATH": os.environ["PATH"], "LOG_LEVEL": "WARNING",
           "DJANGO_SETTINGS_MODULE": "overlap.settings", **PRODUCTION}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy",
                             "--fail-level", "WARNING"], capture_output=True, text=True,
                            env=env, cwd=app, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "staticfiles.W004" not in result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_static_dirs_are_the_folders_that_exist(tmp_path):
    from overlap.settings import STATICFILES_DIRS, existing_static_dirs

    (tmp_path / "here").mkdir()
    (tmp_path / "vendor").mkdir()
    entries = [tmp_path / "here", tmp_path / "gone", ("vendor/x", tmp_path / "vendor"),
               ("vendor/y", tmp_path / "missing")]
    assert existing_static_dirs(entries) == [tmp_path / "here", ("vendor/x", tmp_path / "vendor")]
    # In a checkout after `make install` every folder is there.
    assert ("vendor/htmx", ROOT / "node_modules" / "htmx.org" / "dist") in STATICFILES_DIRS
    assert ROOT / "static-build" in STATICFILES_DIRS


@pytest.mark.parametrize("key,why", [
    ("short-key", "characters"),
    ("a" * 60, "different characters"),
    ("django-insecure-" + "abcdefghij" * 5, "placeholder"),
])
def test_production_refuses_a_weak_secret_key(key, why):
    result = _run(["-c", "import django; django.setup()"], **{**PRODUCTION, "SECRET_KEY": key})
    assert result.returncode != 0
    assert "SECRET_KEY is too weak for production" in result.stderr
    assert why in result.stderr


def test_development_accepts_any_secret_key(tmp_path):
    result = _run(["-c", "import django; django.setup()"], DEBUG="1", SECRET_KEY="short",
                  OVERLAP_VAR_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr


def test_behind_tls_turns_on_https_settings():
    assert _setting("SECURE_SSL_REDIRECT", **PRODUCTION) == "True"
    assert _setting("SECURE_HSTS_SECONDS", **PRODUCTION) == "31536000"
    assert _setting("SESSION_COOKIE_SECURE", **PRODUCTION) == "True"
    assert _setting("CSRF_COOKIE_SECURE", **PRODUCTION) == "True"
    assert _setting("SECURE_PROXY_SSL_HEADER", **PRODUCTION) == \
        "('HTTP_X_FORWARDED_PROTO', 'https')"


def test_without_tls_nothing_forces_https():
    plain = {**PRODUCTION, "BEHIND_TLS": "0"}
    assert _setting("SECURE_SSL_REDIRECT", **plain) == "False"
    assert _setting("SECURE_HSTS_SECONDS", **plain) == "0"
    assert _setting("SESSION_COOKIE_SECURE", **plain) == "False"


@pytest.fixture
def behind_tls(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    return settings


@pytest.mark.django_db
def test_plain_http_is_redirected_to_https_behind_tls(client, behind_tls):
    response = client.get("/accounts/login/")
    assert response.status_code == 301
    assert response["Location"] == "https://testserver/accounts/login/"


@pytest.mark.django_db
def test_https_through_the_proxy_gets_hsts_and_secure_cookies(client, behind_tls):
    response = client.get("/accounts/login/", headers={"X-Forwarded-Proto": "https"})
    assert response.status_code == 200
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    assert response.cookies["csrftoken"]["secure"] is True


@pytest.mark.django_db
def test_probes_reach_health_over_plain_http_behind_tls(client, behind_tls):
    assert client.get("/healthz/live").status_code == 200
    assert client.get("/healthz").status_code in (200, 503)  # answered, not redirected



def test_a_database_outage_is_a_clear_503_not_a_bare_500():
    """PostgreSQL stopped: every page fails at its first query (the session, the login
    check, the view). The site's error handler answers 503 "briefly unavailable, your
    work is kept" with Retry-After, and a plain 500 for anything else; neither page
    touches the database."""
    from django.db import OperationalError
    from django.test import RequestFactory

    from overlap import urls
    from security.errors import server_error

    assert urls.handler500 == "security.errors.server_error"
    request = RequestFactory().get("/exercises/")
    try:
        raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")
    except OperationalError:
        answer = server_error(request)
    assert answer.status_code == 503 and answer["Retry-After"] == "5"
    assert "Nothing is lost" in answer.content.decode()
    htmx = RequestFactory().get("/c/x/run/", HTTP_HX_REQUEST="true")
    try:
        raise OperationalError("gone")
    except OperationalError:
        assert "your work is kept" in server_error(htmx).content.decode()
    try:
        raise ValueError("a bug")
    except ValueError:
        other = server_error(request)
    assert other.status_code == 500 and "wait a few seconds and reload" in \
        other.content.decode()
