"""`make run`'s demo interviewer: with DEBUG off its password is random, kept in
var/demo_password (0600), and that file holds exactly the password, so the README's
`cat var/demo_password` shows what to type."""

import io
import secrets

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _logs_in(password: str) -> bool:
    return User.objects.get(username="interviewer").check_password(password)


def _ensure(monkeypatch, path) -> str:
    monkeypatch.setenv("OVERLAP_DEMO_PASSWORD_FILE", str(path))
    out = io.StringIO()
    call_command("ensure_demo_user", stdout=out)
    return out.getvalue()


def test_the_password_file_holds_exactly_the_password(monkeypatch, tmp_path, settings):
    settings.DEBUG = False
    path = tmp_path / "var" / "demo_password"
    printed = _ensure(monkeypatch, path)
    content = path.read_text()
    password = content.rstrip("\n")
    assert content == password + "\n" and len(password) == 16
    assert path.stat().st_mode & 0o777 == 0o600
    assert f"password {password!r}" in printed
    assert _logs_in(password)
    # Kept across starts.
    assert f"password {password!r}" in _ensure(monkeypatch, path)
    assert path.read_text() == content
    assert _logs_in(password)


def test_an_older_longer_file_keeps_its_password_and_is_rewritten_to_it(
        monkeypatch, tmp_path, settings):
    """An older version wrote a 67-character token and used its first 16 characters."""
    settings.DEBUG = False
    path = tmp_path / "demo_password"
    token = secrets.token_urlsafe(50)
    path.write_text(token + "\n")
    path.chmod(0o600)
    _ensure(monkeypatch, path)
    assert path.read_text() == token[:16] + "\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert _logs_in(token[:16])
    assert [p.name for p in tmp_path.iterdir()] == ["demo_password"]  # no leftover
