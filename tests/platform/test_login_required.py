"""Every staff page needs a login; anonymous visitors go to the login page."""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

PUBLIC = {"login", "healthz", "liveness", "metrics", "password_reset", "password_reset_done",
          "password_reset_confirm", "password_reset_complete"}
SAMPLE_KWARGS = {"slug": "async-parameter-server", "number": 1, "index": 1}


def _named_patterns(resolver=None, prefix="", namespace=""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue  # the admin has its own login; checked below
            ns = entry.namespace or namespace
            yield from _named_patterns(entry, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern) and entry.name:
            name = f"{namespace}:{entry.name}" if namespace else entry.name
            yield name, prefix + str(entry.pattern)


def _url(route: str) -> str:
    import re
    def fill(match):
        converter, name = match.group(1), match.group(2)
        return str(SAMPLE_KWARGS.get(name, "x" if converter != "int" else 1))
    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)


def test_there_are_pages_to_check():
    names = [name for name, _ in _named_patterns()]
    assert "catalog:exercise_list" in names and "qa:search" in names


@pytest.mark.parametrize("name,route", list(_named_patterns()))
def test_anonymous_visitor_is_sent_to_login(client, synced, name, route):
    if name.split(":")[-1] in PUBLIC:
        pytest.skip("public by design")
    url = _url(route)
    if name.startswith("candidate:"):
        # No login for candidates: the unguessable token is the key, and a wrong one
        # opens nothing.
        assert client.get(url).status_code in (404, 405), (name, url)
        assert client.post(url).status_code in (403, 404), (name, url)
        return
    response = client.get(url)
    assert response.status_code == 302, (name, url, response.status_code)
    assert response["Location"].startswith("/accounts/login/?next=")


def test_admin_needs_a_superuser_login(client):
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_health_check_is_public(client):
    response = client.get("/healthz")
    assert response.status_code in (200, 503)  # 503 while no worker runs: test_healthz.py
    assert response.json()["checks"]["database"]["ok"] is True


def test_login_page_logs_staff_in(client, interviewer):
    response = client.post("/accounts/login/",
                           {"username": "ada", "password": "correct horse battery"})
    assert response.status_code == 302
    assert client.get("/exercises/").status_code == 200
