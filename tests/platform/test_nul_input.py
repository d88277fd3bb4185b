"""A NUL character in a form or a query is refused with a reason, never a server error:
PostgreSQL can neither store nor compare one, and some views read their fields directly."""

import pytest

from authoring.models import ExerciseDraft
from authoring.services import file_hash

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db


def test_an_author_saving_a_file_with_a_nul_is_told_and_the_draft_is_unchanged(
        author_client, valid_draft):
    before = dict(valid_draft.files)
    response = author_client.post(
        f"/authoring/exercises/{valid_draft.slug}/files/solution.py/",
        {"text": "x = '\x00'\n", "base": file_hash(valid_draft, "solution.py")})
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()
    assert ExerciseDraft.objects.get(pk=valid_draft.pk).files == before


def test_a_candidate_saving_code_with_a_nul_is_told_and_the_pad_is_unchanged(
        client, live_session):
    start = live_session.pad_text
    response = client.post(f"/c/{live_session.token}/save/", {"code": "x = '\x00'\n"})
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()
    live_session.refresh_from_db()
    assert live_session.pad_text == start


def test_a_query_with_a_nul_is_refused(staff_client):
    response = staff_client.get("/exercises/", {"q": "grad\x00ient"})
    assert response.status_code == 400
    assert staff_client.get("/exercises/", {"q": "gradient"}).status_code == 200
