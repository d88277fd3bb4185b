"""Response headers: a Content-Security-Policy with no inline script on every page, and no
caching of the pages that hold a candidate's code or an interviewer's notes."""

import json
import re
from pathlib import Path

import pytest

from tests.platform.test_deploy_settings import PRODUCTION, _run

pytestmark = pytest.mark.django_db
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def _directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


def test_pages_carry_a_policy_that_forbids_inline_script(staff_client, synced):
    csp = _directives(staff_client.get("/exercises/"))
    assert csp["script-src"] == ["'self'"]
    assert csp["default-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in csp["style-src"] and "'unsafe-eval'" not in csp["script-src"]


def test_the_live_pad_may_open_websockets_to_this_site_only(staff_client):
    csp = _directives(staff_client.get("/accounts/login/"))
    assert "'self'" in csp["connect-src"]  # CSP 3: same-origin ws:/wss: included
    assert not any(source in ("ws:", "wss:", "*", "https:") for source in csp["connect-src"])


def test_allowed_hosts_get_explicit_websocket_sources():
    def connect_src(**env):
        result = _run(["-c", "import django, json; django.setup(); "
                             "from django.conf import settings; print(json.dumps("
                             "[str(s) for s in settings.SECURE_CSP['connect-src']]))"], **env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    connect = connect_src(**PRODUCTION)
    assert connect == ["'self'", "wss://overlap.example.org:*"]  # TLS: no plain ws://
    plain = connect_src(**{**PRODUCTION, "BEHIND_TLS": "0", "ALLOWED_HOSTS": ".example.org"})
    assert plain == ["'self'", "wss://*.example.org:*", "ws://*.example.org:*"]
    # `make run`'s hosts include IPv6 loopback, which a CSP host source cannot name (the
    # browser logs an error on every page): 'self' covers it.
    local = connect_src(**{**PRODUCTION, "BEHIND_TLS": "0",
                           "ALLOWED_HOSTS": "127.0.0.1,localhost,[::1],::1"})
    assert local == ["'self'", "wss://127.0.0.1:*", "ws://127.0.0.1:*",
                     "wss://localhost:*", "ws://localhost:*"]


def test_the_candidate_workspace_has_the_policy_too(client, live_session):
    response = client.get(f"/c/{live_session.token}/")
    assert response.status_code == 200
    assert _directives(response)["script-src"] == ["'self'"]


def test_no_template_has_inline_script_or_handlers():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        for match in re.finditer(r"<script\b[^>]*>", text):
            if "src=" not in match.group(0):
                offenders.append(f"{path.relative_to(TEMPLATES)}: {match.group(0)}")
        for match in re.finditer(r"\son[a-z]+\s*=", text):
            offenders.append(f"{path.relative_to(TEMPLATES)}: {match.group(0).strip()}")
        if "javascript:" in text:
            offenders.append(f"{path.relative_to(TEMPLATES)}: javascript: URL")
    assert offenders == []


@pytest.mark.parametrize("page", ["workspace", "hints"])
def test_candidate_pages_are_never_cached(client, live_session, page):
    url = f"/c/{live_session.token}/" + ("" if page == "workspace" else "hints/")
    response = client.get(url)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


@pytest.mark.parametrize("suffix", ["", "scorecard/", "scorecard.md", "code/"])
def test_the_console_and_scorecard_are_never_cached(staff_client, live_session, suffix):
    response = staff_client.get(f"/sessions/{live_session.pk}/{suffix}")
    assert response.status_code == 200, suffix
    assert "no-store" in response["Cache-Control"]


def test_the_catalog_may_be_cached_privately(staff_client, synced):
    response = staff_client.get("/exercises/")
    assert "no-store" not in response.get("Cache-Control", "")
