"""Staff pages need a staff group: a logged-in user in no group sees nothing of the staff
side, interviewers see the interview side, authors the authoring side."""

import pytest
from django.contrib.auth.models import Group, User

from tests.platform.test_login_required import PUBLIC, _named_patterns, _url

pytestmark = pytest.mark.django_db

ACCOUNT_PAGES = {"logout", "password_change", "password_change_done"}
NO_ACCESS = "Ask an admin for access"


def _staff_pages():
    for name, route in _named_patterns():
        short = name.split(":")[-1]
        if short in PUBLIC or short in ACCOUNT_PAGES or name.startswith("candidate:"):
            continue
        yield name, route


STAFF_PAGES = list(_staff_pages())


@pytest.fixture
def outsider(db) -> User:
    return User.objects.create_user("eve", password="correct horse battery")


def test_the_list_covers_both_sides():
    names = {name for name, _ in STAFF_PAGES}
    assert {"catalog:exercise_detail", "interviews:console", "qa:bank_list",
            "authoring:file", "authoring:import", "system_status"} <= names


@pytest.mark.parametrize("name,route", STAFF_PAGES)
def test_a_user_in_no_group_is_told_to_ask_an_admin(client, outsider, name, route):
    client.force_login(outsider)
    for method in (client.get, client.post):
        response = method(_url(route))
        assert response.status_code == 403, (name, method.__name__, response.status_code)
        if name != "system_status":
            assert NO_ACCESS in response.content.decode(), name


def test_a_user_in_no_group_sees_no_guide_solution_or_grader(client, synced, outsider):
    from catalog.models import Exercise

    exercise = Exercise.objects.get(slug="async-parameter-server")
    solution = exercise.current_version.files["solution.py"]
    client.force_login(outsider)
    for url in ("/exercises/", "/exercises/async-parameter-server/",
                "/exercises/async-parameter-server/v1/", "/questions/", "/sessions/",
                "/authoring/", "/authoring/exercises/async-parameter-server/"):
        response = client.get(url)
        body = response.content.decode()
        assert response.status_code == 403, url
        assert "class Trainer" not in body and solution[:200] not in body, url


def test_a_user_in_no_group_can_still_log_out(client, outsider):
    client.force_login(outsider)
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/exercises/").status_code == 302  # logged out: to the login page


@pytest.mark.parametrize("name,route", [(n, r) for n, r in STAFF_PAGES
                                        if n.startswith("authoring:")])
def test_an_interviewer_gets_no_authoring_page(staff_client, synced, name, route):
    assert staff_client.get(_url(route)).status_code == 403, name


@pytest.mark.parametrize("name,route", [(n, r) for n, r in STAFF_PAGES
                                        if n.split(":")[0] in {"catalog", "qa", "interviews"}])
def test_an_interviewer_reaches_the_interview_side(staff_client, synced, name, route):
    response = staff_client.get(_url(route))
    assert response.status_code != 403, name
    assert NO_ACCESS not in response.content.decode()


@pytest.mark.parametrize("name,route", [(n, r) for n, r in STAFF_PAGES
                                        if n.startswith("authoring:")])
def test_an_author_reaches_the_authoring_side(client, synced, author, name, route):
    client.force_login(author)
    response = client.get(_url(route))
    assert NO_ACCESS not in response.content.decode(), name
    assert response.status_code != 403, name


def test_joining_a_group_opens_the_interview_side(client, synced, outsider):
    client.force_login(outsider)
    assert client.get("/exercises/").status_code == 403
    outsider.groups.add(Group.objects.get(name="interviewers"))
    assert client.get("/exercises/").status_code == 200


def test_superusers_see_everything(client, synced):
    admin = User.objects.create_superuser("root", password="correct horse battery")
    client.force_login(admin)
    for url in ("/exercises/", "/sessions/", "/authoring/", "/questions/"):
        assert client.get(url).status_code == 200, url
