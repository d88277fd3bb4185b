"""Only authors (and superusers) reach authoring; interviewers get 403; candidates nothing."""

import pytest
from django.urls import reverse

from authoring.models import ExerciseDraft

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db


def _urls(slug: str) -> list[tuple[str, str]]:
    return [
        ("get", reverse("authoring:index")),
        ("get", reverse("authoring:new")),
        ("post", reverse("authoring:new")),
        ("get", reverse("authoring:import")),
        ("post", reverse("authoring:preview")),
        ("get", reverse("authoring:draft", args=[slug])),
        ("post", reverse("authoring:draft_start", args=[slug])),
        ("get", reverse("authoring:details", args=[slug])),
        ("post", reverse("authoring:details", args=[slug])),
        ("get", reverse("authoring:file", args=[slug, "solution.py"])),
        ("post", reverse("authoring:file", args=[slug, "solution.py"])),
        ("post", reverse("authoring:file_add", args=[slug])),
        ("post", reverse("authoring:file_delete", args=[slug, "examples/x.py"])),
        ("post", reverse("authoring:validate", args=[slug])),
        ("get", reverse("authoring:validation", args=[slug, 1])),
        ("post", reverse("authoring:publish", args=[slug])),
        ("post", reverse("authoring:discard", args=[slug])),
        ("get", reverse("authoring:history", args=[slug])),
        ("get", reverse("authoring:diff", args=[slug])),
        ("get", reverse("authoring:export", args=[slug]) + "?source=v1"),
        ("get", reverse("authoring:bank_list")),
        ("get", reverse("authoring:bank_new")),
        ("get", reverse("authoring:bank_detail", args=["distributed-training"])),
        ("get", reverse("authoring:bank_export", args=["distributed-training"])),
        ("get", reverse("authoring:question_new", args=["distributed-training", "question"])),
        ("post", reverse("authoring:question_retire", args=["distributed-training", "x"])),
    ]


def test_interviewers_are_refused_everywhere_and_nothing_changes(staff_client, synced):
    for method, url in _urls("async-parameter-server"):
        response = getattr(staff_client, method)(url)
        assert response.status_code == 403, (method, url)
    assert not ExerciseDraft.objects.exists()


def test_anonymous_visitors_and_candidates_are_sent_to_the_login(client, live_session):
    # A candidate holds only a session token: their workspace opens, authoring does not.
    assert client.get(f"/c/{live_session.token}/").status_code == 200
    for method, url in _urls("async-parameter-server"):
        response = getattr(client, method)(url)
        assert response.status_code == 302, (method, url)
        assert response["Location"].startswith("/accounts/login/"), (method, url)
    assert not ExerciseDraft.objects.exists()


def test_authors_and_superusers_get_in(author_client, client, superuser, synced):
    assert author_client.get("/authoring/").status_code == 200
    client.force_login(superuser)
    page = client.get("/authoring/").content.decode()
    assert "Pipelined model-parallel" in page or "async-parameter-server" in page


def test_the_authoring_pages_do_not_leak_into_the_candidate_workspace(client, live_session):
    html = client.get(f"/c/{live_session.token}/").content.decode()
    assert "/authoring/" not in html
