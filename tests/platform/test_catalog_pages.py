import pytest

pytestmark = pytest.mark.django_db


def test_list_shows_every_exercise(staff_client, synced):
    from catalog.models import Exercise

    page = staff_client.get("/exercises/").content.decode()
    for exercise in Exercise.objects.all():
        assert f"/exercises/{exercise.slug}/" in page
    assert page.count('class="exercise-card"') == Exercise.objects.count() >= 3


def test_filter_by_difficulty(staff_client, synced):
    from catalog.models import Exercise

    page = staff_client.get("/exercises/?difficulty=hard").content.decode()
    hard = Exercise.objects.filter(difficulty="hard")
    assert page.count('class="exercise-card"') == hard.count() >= 1
    assert "/exercises/pipeline-model-parallel/" in page
    assert "/exercises/async-parameter-server/" not in page  # medium


def test_filter_by_tag(staff_client, synced):
    page = staff_client.get("/exercises/?tag=parameter-server").content.decode()
    assert page.count('class="exercise-card"') == 1
    assert "/exercises/async-parameter-server/" in page
    assert "No exercise matches" in staff_client.get("/exercises/?tag=nope").content.decode()


def test_htmx_filter_returns_only_the_results(staff_client, synced):
    response = staff_client.get("/exercises/?tag=parameter-server",
                                headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html
    assert html.count('class="exercise-card"') == 1


def test_exercise_page_shows_the_whole_guide(staff_client, synced):
    from catalog.models import Exercise

    guide = Exercise.objects.get(slug="async-gradient-accumulation").current_version.guide
    page = staff_client.get("/exercises/async-gradient-accumulation/").content.decode()
    for section in ("Interview script", "Progressive hints", "Solution walkthrough", "Rubric",
                    "Follow-up questions", "Common applications", "Candidate prompt"):
        assert section in page
    for criterion in guide["rubric"]:
        assert criterion["title"].replace("'", "&#x27;") in page
    assert guide["applications"]["items"][-1]["title"] in page
    # Hints are not dumped on the page: they come one at a time.
    assert "Hint 1 of 4" not in page
    assert "Show hint 1" in page


def test_hints_are_revealed_one_at_a_time(staff_client, synced):
    from catalog.models import Exercise

    hints = Exercise.objects.get(slug="pipeline-model-parallel").current_version.guide["hints"]
    first = staff_client.get("/exercises/pipeline-model-parallel/v1/hints/1/",
                             headers={"HX-Request": "true"}).content.decode()
    assert "Hint 1 of 4" in first
    assert "Expected answer" in first
    assert "Show hint 2" in first and "Show hint 3" not in first
    assert hints[1]["expected_answer"][:30] not in first
    last = staff_client.get("/exercises/pipeline-model-parallel/v1/hints/4/").content.decode()
    assert "Hint 4 of 4" in last and "Show hint" not in last
    assert staff_client.get("/exercises/pipeline-model-parallel/v1/hints/5/").status_code == 404


def test_old_versions_stay_browsable(staff_client, content_dir):
    from content.services import content_sync

    content_sync(root=content_dir)
    prompt = content_dir / "async-parameter-server" / "prompt.md"
    prompt.write_text("A completely new prompt.\n")
    content_sync(root=content_dir)
    assert "A completely new prompt." in staff_client.get(
        "/exercises/async-parameter-server/").content.decode()
    old = staff_client.get("/exercises/async-parameter-server/v1/").content.decode()
    assert "A completely new prompt." not in old
    assert "(not current)" in old
    assert staff_client.get("/exercises/async-parameter-server/v9/").status_code == 404


def test_only_authors_see_the_authoring_link(client, interviewer, author):
    client.force_login(interviewer)
    assert "/authoring/" not in client.get("/exercises/").content.decode()
    client.force_login(author)
    assert 'href="/authoring/"' in client.get("/exercises/").content.decode()
