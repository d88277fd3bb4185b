"""Publishing: only valid, validated content; every publish a new version; history and diff."""

import pytest

from authoring import services
from authoring.models import ExerciseDraft, Publication
from catalog.models import Exercise, ExerciseVersion

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db


def _validated(draft, author):
    from tests.platform.authoring_fixtures import run_validation

    validation = services.validation_request(draft=draft, user=author)
    run_validation(validation.pk)
    return validation


def _publish(client, slug):
    return client.post(f"/authoring/exercises/{slug}/publish/")


def test_publishing_a_validated_draft_creates_the_exercise(author_client, author, valid_draft,
                                                           fake_sandbox):
    validation = _validated(valid_draft, author)
    response = _publish(author_client, valid_draft.slug)
    assert response.status_code == 302
    exercise = Exercise.objects.get(slug=valid_draft.slug)
    version = exercise.current_version
    assert version.number == 1 and version.title == "Tiny workers"
    assert version.files == valid_draft.files
    assert version.guide["hints"][1]["expected_answer"] == "One at a time."
    publication = Publication.objects.get(version=version)
    assert (publication.published_by, publication.validation) == (author, validation)
    # Interviewers see it in the catalog at once.
    assert "Tiny workers" in author_client.get("/exercises/").content.decode()


def test_nothing_is_published_without_a_validation(author_client, valid_draft):
    html = _publish(author_client, valid_draft.slug).content.decode()
    assert "Validate the draft first" in html
    assert not Exercise.objects.filter(slug=valid_draft.slug).exists()


def test_a_failed_validation_blocks_publishing(author_client, author, valid_draft, fake_sandbox):
    fake_sandbox.results["starter.py"] = fake_sandbox.result("accepted", speedup=1.0)
    _validated(valid_draft, author)
    response = _publish(author_client, valid_draft.slug)
    assert response.status_code == 400
    assert "The latest validation did not pass" in response.content.decode()
    assert not Exercise.objects.filter(slug=valid_draft.slug).exists()


def test_any_change_after_validating_needs_a_new_validation(author_client, author, valid_draft,
                                                            fake_sandbox):
    _validated(valid_draft, author)
    valid_draft.guide = {**valid_draft.guide, "overview": "Changed after validating."}
    valid_draft.save()
    html = _publish(author_client, valid_draft.slug).content.decode()
    assert "changed since its latest validation" in html
    assert not Exercise.objects.filter(slug=valid_draft.slug).exists()


def test_invalid_details_block_publishing_even_after_a_passed_validation(author_client, author,
                                                                         valid_draft,
                                                                         fake_sandbox):
    valid_draft.guide = {**valid_draft.guide, "hints": [{"prompt": "", "expected_answer": "x"}]}
    valid_draft.save()
    _validated(valid_draft, author)  # the code side passes...
    response = _publish(author_client, valid_draft.slug)
    html = response.content.decode()
    assert response.status_code == 400
    assert "nothing was published" in html
    assert "guide.yaml: hints[0].prompt: must not be empty" in html
    assert not Exercise.objects.filter(slug=valid_draft.slug).exists()
    assert ExerciseDraft.objects.get(pk=valid_draft.pk).guide["hints"][0]["expected_answer"] == "x"


def test_every_publish_is_a_new_version_and_sessions_keep_theirs(author_client, client, author,
                                                                 interviewer, synced,
                                                                 fake_sandbox):
    from interviews import services as sessions

    exercise = Exercise.objects.get(slug="async-parameter-server")
    v1 = exercise.current_version
    session = sessions.session_create(interviewer=interviewer, exercise=exercise,
                                      candidate_name="Lin", candidate_email="l@example.org")
    draft = services.draft_for_exercise(exercise=exercise, user=author)
    draft.files = {**draft.files, "starter.py": draft.files["starter.py"] + "# v2 marker\n"}
    draft.save()
    fake_sandbox.results = {p.file: fake_sandbox.result(p.expected, p.expected_failing)
                            for p in services.checks.plan(draft.slug, draft.files)[1]}
    _validated(draft, author)
    assert _publish(author_client, draft.slug).status_code == 302
    exercise.refresh_from_db()
    assert exercise.current_version.number == 2
    assert ExerciseVersion.objects.get(pk=v1.pk).files["starter.py"] == v1.files["starter.py"]
    # The session started on v1 keeps v1's starter; a new one gets v2.
    session.refresh_from_db()
    assert session.exercise_version_id == v1.pk
    new = sessions.session_create(interviewer=interviewer, exercise=exercise,
                                  candidate_name="Mo", candidate_email="m@example.org")
    sessions.session_start(session=session)
    sessions.session_start(session=new)
    old_workspace = client.get(f"/c/{session.token}/").content.decode()
    new_workspace = client.get(f"/c/{new.token}/").content.decode()
    assert "class Trainer" in old_workspace and "# v2 marker" not in old_workspace
    assert "# v2 marker" in new_workspace


def test_an_unchanged_draft_has_nothing_to_publish(author_client, author, synced, fake_sandbox):
    exercise = Exercise.objects.get(slug="pipeline-model-parallel")
    draft = services.draft_for_exercise(exercise=exercise, user=author)
    html = _publish(author_client, draft.slug).content.decode()
    assert "Nothing to publish" in html
    assert exercise.versions.count() == 1


def test_history_lists_versions_with_who_published_them(author_client, author, valid_draft,
                                                        fake_sandbox):
    _validated(valid_draft, author)
    _publish(author_client, valid_draft.slug)
    html = author_client.get(f"/authoring/exercises/{valid_draft.slug}/history/").content.decode()
    assert "v1" in html and "published by grace" in html and "after validation #" in html


def test_the_diff_shows_what_changed_between_versions_escaped(author_client, author, valid_draft,
                                                              fake_sandbox):
    _validated(valid_draft, author)
    _publish(author_client, valid_draft.slug)
    valid_draft.refresh_from_db()
    valid_draft.prompt = valid_draft.prompt + "\nNew line <script>alert(1)</script>\n"
    valid_draft.save()
    html = author_client.get(
        f"/authoring/exercises/{valid_draft.slug}/diff/?from=v1&to=draft").content.decode()
    assert "prompt.md" in html and "changed" in html
    assert "+New line &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    assert "grader.py" not in html  # unchanged files are left out
    same = author_client.get(f"/authoring/exercises/{valid_draft.slug}/diff/?from=v1&to=v1")
    assert "No differences" in same.content.decode()


def test_discarding_a_draft_keeps_the_published_versions(author_client, author, synced):
    exercise = Exercise.objects.get(slug="async-parameter-server")
    services.draft_for_exercise(exercise=exercise, user=author)
    author_client.post("/authoring/exercises/async-parameter-server/discard/")
    assert not ExerciseDraft.objects.exists()
    assert exercise.versions.count() == 1


def test_sync_content_never_reverts_a_version_an_author_published(author_client, author,
                                                                    synced, fake_sandbox,
                                                                    settings, tmp_path):
    """An upgrade or a backup command runs `sync_content` again: the repository's folder,
    older than what an author published in the browser, must not become current again."""
    import shutil

    from content.services import content_sync

    exercise = Exercise.objects.get(slug="async-parameter-server")
    draft = services.draft_for_exercise(exercise=exercise, user=author)
    draft.files = {**draft.files, "starter.py": draft.files["starter.py"] + "# author's\n"}
    draft.save()
    fake_sandbox.results = {p.file: fake_sandbox.result(p.expected, p.expected_failing)
                            for p in services.checks.plan(draft.slug, draft.files)[1]}
    _validated(draft, author)
    assert _publish(author_client, draft.slug).status_code == 302
    exercise.refresh_from_db()
    assert exercise.current_version.number == 2

    # The same repository again: nothing changes.
    report = content_sync(root=settings.EXERCISES_DIR)
    exercise.refresh_from_db()
    assert exercise.current_version.number == 2 and exercise.versions.count() == 2
    line = next(x for x in report.lines if "async-parameter-server" in x)
    assert "v2 stays current" in line

    # A repository whose folder changed (an upgrade): still the author's version, and
    # the report says why the repository's was not loaded.
    root = tmp_path / "exercises"
    shutil.copytree(settings.EXERCISES_DIR, root)
    prompt = root / "async-parameter-server" / "prompt.md"
    prompt.write_text(prompt.read_text() + "\nA new paragraph from the repository.\n")
    report = content_sync(root=root)
    exercise.refresh_from_db()
    # The repository's folder is stored as v3, not current.
    assert exercise.current_version.number == 2 and exercise.versions.count() == 3
    line = next(x for x in report.lines if "async-parameter-server" in x)
    assert "kept v2, published in the browser" in line
    # An exercise nobody published in the browser still follows the repository.
    other = root / "pipeline-model-parallel" / "prompt.md"
    other.write_text(other.read_text() + "\nAnother paragraph.\n")
    content_sync(root=root)
    assert Exercise.objects.get(slug="pipeline-model-parallel").current_version.number == 2
