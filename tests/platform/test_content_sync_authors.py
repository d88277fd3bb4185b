"""sync_content never overrides an author: the repository only adds exercises and
versions; a version published in the browser stays current until an operator chooses
the repository's folder (`sync_content --take-repository <slug>`)."""

import shutil
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from authoring import services
from catalog.models import Exercise

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db

SLUG = "async-parameter-server"


def _sync(root, *args) -> str:
    out = StringIO()
    call_command("sync_content", "--dir", str(root), *args, stdout=out)
    return out.getvalue()


def _publish_in_browser(client, author, fake_sandbox, slug=SLUG):
    """What an author does: edit the exercise's draft, validate it, publish it."""
    from tests.platform.authoring_fixtures import run_validation

    exercise = Exercise.objects.get(slug=slug)
    draft = services.draft_for_exercise(exercise=exercise, user=author)
    draft.files = {**draft.files, "starter.py": draft.files["starter.py"] + "# the author's\n"}
    draft.save()
    fake_sandbox.results = {p.file: fake_sandbox.result(p.expected, p.expected_failing)
                            for p in services.checks.plan(draft.slug, draft.files)[1]}
    run_validation(services.validation_request(draft=draft, user=author).pk)
    assert client.post(f"/authoring/exercises/{slug}/publish/").status_code == 302
    exercise.refresh_from_db()
    return exercise.current_version


def _change_prompt(root, slug, text):
    prompt = root / slug / "prompt.md"
    prompt.write_text(prompt.read_text() + f"\n{text}\n")


@pytest.fixture
def published(content_dir, author_client, author, fake_sandbox):
    """The repository loaded, then v2 of the exercise published in the browser."""
    _sync(content_dir)
    version = _publish_in_browser(author_client, author, fake_sandbox)
    assert version.number == 2
    return version


def test_a_browser_version_survives_sync_content_run_twice(content_dir, published):
    _change_prompt(content_dir, SLUG, "A paragraph the repository added later.")

    first = _sync(content_dir)
    second = _sync(content_dir)

    exercise = Exercise.objects.get(slug=SLUG)
    assert exercise.current_version == published
    assert "author's" in exercise.current_version.files["starter.py"]
    # The repository's folder is kept as one version, not current, and said so both times.
    assert list(exercise.versions.values_list("number", flat=True)) == [3, 2, 1]
    assert "later" in exercise.versions.get(number=3).prompt
    for output in (first, second):
        assert (f"exercise {SLUG}: kept v2, published in the browser; the repository has a "
                "newer folder") in output
        assert f"sync_content --take-repository {SLUG}" in output
    assert "stored as v3, not current" in first and "is v3, not current" in second


def test_the_same_repository_again_changes_nothing(content_dir, published):
    output = _sync(content_dir)
    exercise = Exercise.objects.get(slug=SLUG)
    assert exercise.current_version == published and exercise.versions.count() == 2
    assert "v2 stays current, published in the browser" in output
    assert "take-repository" not in output


def test_a_new_repository_exercise_is_added_and_a_never_edited_one_follows(content_dir,
                                                                           published):
    new = content_dir / "async-parameter-server-two"
    shutil.copytree(content_dir / SLUG, new)
    meta = yaml.safe_load((new / "exercise.yaml").read_text())
    meta.update(slug=new.name, title="Asynchronous parameter server, again")
    (new / "exercise.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    _change_prompt(content_dir, "pipeline-model-parallel", "A clarification.")

    output = _sync(content_dir)

    assert f"exercise {new.name}: created (v1)" in output
    assert Exercise.objects.get(slug=new.name).current_version.number == 1
    pipeline = Exercise.objects.get(slug="pipeline-model-parallel")
    assert pipeline.current_version.number == 2
    assert pipeline.current_version.prompt.endswith("A clarification.\n")
    assert Exercise.objects.get(slug=SLUG).current_version == published


def test_authors_see_that_the_repository_has_a_newer_folder(content_dir, published,
                                                            author_client):
    assert "repository has a newer folder" not in author_client.get("/authoring/").content.decode()
    _change_prompt(content_dir, SLUG, "A paragraph the repository added later.")
    _sync(content_dir)

    index = author_client.get("/authoring/").content.decode()
    assert "The repository has a newer folder (v3, not current)" in index
    history = author_client.get(f"/authoring/exercises/{SLUG}/history/").content.decode()
    assert "from the repository, not current" in history
    assert f"sync_content --take-repository {SLUG}" in history
    diff = author_client.get(f"/authoring/exercises/{SLUG}/diff/?from=v2&to=v3")
    assert "A paragraph the repository added later." in diff.content.decode()


def test_the_admin_lists_the_newer_repository_folder(content_dir, published, client,
                                                     superuser):
    _change_prompt(content_dir, SLUG, "A paragraph the repository added later.")
    _sync(content_dir)
    client.force_login(superuser)
    html = client.get("/admin/catalog/exercise/").content.decode()
    assert f"newer folder v3, not current (sync_content --take-repository {SLUG})" in html


def test_the_operator_takes_the_repository_folder(content_dir, published, author_client):
    _change_prompt(content_dir, SLUG, "A paragraph the repository added later.")
    _sync(content_dir)

    output = _sync(content_dir, "--take-repository", SLUG)

    exercise = Exercise.objects.get(slug=SLUG)
    assert exercise.current_version.number == 3 and exercise.versions.count() == 3
    assert "later" in exercise.current_version.prompt
    assert f"exercise {SLUG}: took the repository's folder: v3 is current (was v2)" in output
    assert "newer folder" not in author_client.get("/authoring/").content.decode()
    # From now on the exercise follows the repository again, quietly.
    assert "unchanged" in _sync(content_dir).split(f"exercise {SLUG}: ")[1].splitlines()[0]
    _change_prompt(content_dir, SLUG, "And one more.")
    _sync(content_dir)
    assert Exercise.objects.get(slug=SLUG).current_version.number == 4


def test_taking_an_unchanged_repository_folder_over_the_author(content_dir, published):
    """The repository never changed: taking it brings its content back as a new version."""
    output = _sync(content_dir, "--take-repository", SLUG)
    exercise = Exercise.objects.get(slug=SLUG)
    assert exercise.current_version.number == 3
    assert exercise.current_version.content_hash == exercise.versions.get(number=1).content_hash
    assert "took the repository's folder: v3 is current (was v2)" in output


def test_take_repository_names_an_exercise_the_repository_lacks(content_dir, published):
    with pytest.raises(CommandError, match="nothing was loaded"):
        call_command("sync_content", "--dir", str(content_dir), "--take-repository",
                     "no-such-exercise", stdout=StringIO(), stderr=StringIO())
    assert Exercise.objects.get(slug=SLUG).current_version == published


def test_an_author_publishes_again_after_the_repository_changed(content_dir, published,
                                                                author_client, author,
                                                                fake_sandbox):
    _change_prompt(content_dir, SLUG, "A paragraph the repository added later.")
    _sync(content_dir)
    draft = services.draft_for_exercise(exercise=published.exercise, user=author)
    draft.files = {**draft.files, "starter.py": draft.files["starter.py"] + "# again\n"}
    draft.save()
    from tests.platform.authoring_fixtures import run_validation

    run_validation(services.validation_request(draft=draft, user=author).pk)
    assert author_client.post(f"/authoring/exercises/{SLUG}/publish/").status_code == 302

    exercise = Exercise.objects.get(slug=SLUG)
    assert exercise.current_version.number == 4
    # The author's newer publication supersedes the repository's v3: no notice, no revert.
    assert "newer folder" not in author_client.get("/authoring/").content.decode()
    output = _sync(content_dir)
    assert "v4 stays current" in output
    assert Exercise.objects.get(slug=SLUG).current_version.number == 4
