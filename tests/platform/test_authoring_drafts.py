"""Drafts: create, edit everything as typed, problems named precisely, nothing lost."""

import pytest
from django.urls import reverse

from authoring import services
from authoring.models import ExerciseDraft
from authoring.selectors import draft_state
from catalog.models import Exercise

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db


def _problems(draft) -> list[str]:
    return [str(p) for p in draft_state(ExerciseDraft.objects.get(pk=draft.pk)).problems]


def _post_details(client, draft, **overrides):
    from tests.platform.authoring_fixtures import form_data

    draft.refresh_from_db()
    return client.post(reverse("authoring:details", args=[draft.slug]),
                       form_data(draft, **overrides))


def test_an_author_creates_a_new_exercise_that_starts_from_working_code(author_client):
    response = author_client.post("/authoring/new/", {"slug": "ring-demo", "title": "Ring demo"})
    assert response.status_code == 302
    draft = ExerciseDraft.objects.get(slug="ring-demo")
    assert set(draft.files) >= {"starter.py", "solution.py", "grader.py"}
    assert any(path.startswith("examples/") for path in draft.files)
    page = author_client.get(response["Location"]).content.decode()
    assert "Details, prompt and interviewer guide" in page
    # Blank details are listed as problems, by file and field, not rejected.
    problems = _problems(draft)
    assert "exercise.yaml: summary: must not be empty" in problems
    assert "prompt.md: file is empty" in problems
    assert "guide.yaml: hints[0].prompt: must not be empty" in problems


def test_a_slug_must_be_a_slug_and_new(author_client, synced):
    bad = author_client.post("/authoring/new/", {"slug": "Ring Demo", "title": "x"})
    assert "lower-case letters, digits and hyphens" in bad.content.decode()
    taken = author_client.post("/authoring/new/", {"slug": "async-parameter-server", "title": "x"})
    assert "already exists" in taken.content.decode()
    assert not ExerciseDraft.objects.exists()


def test_editing_an_exercise_copies_its_current_version_into_a_draft(author_client, synced):
    exercise = Exercise.objects.get(slug="async-parameter-server")
    response = author_client.post("/authoring/exercises/async-parameter-server/edit/")
    assert response.status_code == 302
    draft = ExerciseDraft.objects.get(slug="async-parameter-server")
    version = exercise.current_version
    assert draft.based_on == version
    assert draft.files == version.files and draft.prompt == version.prompt
    assert draft.meta["title"] == version.title
    state = draft_state(draft)
    assert state.problems == [] and state.changed is False
    page = author_client.get("/authoring/exercises/async-parameter-server/").content.decode()
    assert "same as v1" in page and "Every file is valid" in page


def test_the_details_form_shows_every_section_with_the_current_text(author_client, valid_draft):
    page = author_client.get(f"/authoring/exercises/{valid_draft.slug}/details/").content.decode()
    for name in ("title", "prompt", "hints[1].expected_answer", "rubric[0].levels[3].label",
                 "followups.questions[0].good_answer", "applications.items[0].title",
                 "coding.watch_for[0]", "walkthrough.key_points[0]"):
        assert f'name="{name}"' in page, name
    assert "One at a time." in page
    # The Markdown preview is rendered through the sanitizer.
    assert "<code>asyncio.gather</code>" in page


def test_saving_details_keeps_what_was_typed_even_when_invalid(author_client, valid_draft):
    response = _post_details(
        author_client, valid_draft,
        **{"hints[1].prompt": "   ", "rubric[0].levels[1].score": "1",
           "time_minutes": "soon", "tags": "asyncio, Not A Slug"},
    )
    assert response.status_code == 302
    draft = ExerciseDraft.objects.get(pk=valid_draft.pk)
    assert draft.guide["hints"][1]["prompt"] == "   "
    assert draft.meta["time_minutes"] == "soon"
    problems = _problems(draft)
    assert "guide.yaml: hints[1].prompt: must not be empty" in problems
    assert ("guide.yaml: rubric[0].levels: level scores must be unique and ascending, "
            "got [1, 1, 3, 4]") in problems
    assert "exercise.yaml: time_minutes: must be a whole number" in problems
    assert any(p.startswith("exercise.yaml: tags[1]: must be lower-case") for p in problems)
    # The form shows the text as typed, and marks the inputs at fault.
    page = author_client.get(f"/authoring/exercises/{draft.slug}/details/").content.decode()
    assert 'value="soon"' in page
    assert 'id="f-hints-1-prompt-input" name="hints[1].prompt" rows="2" data-preview ' \
           'aria-invalid="true"' in page


def test_add_remove_and_move_buttons_edit_the_lists_and_save(author_client, valid_draft):
    _post_details(author_client, valid_draft, op="add:hints")
    draft = ExerciseDraft.objects.get(pk=valid_draft.pk)
    assert len(draft.guide["hints"]) == 3 and draft.guide["hints"][2] == {
        "prompt": "", "expected_answer": ""}

    _post_details(author_client, draft, op="up:hints[1]")
    draft.refresh_from_db()
    assert draft.guide["hints"][0]["prompt"] == "How many batches per worker?"

    _post_details(author_client, draft, op="remove:hints[2]")
    draft.refresh_from_db()
    assert len(draft.guide["hints"]) == 2

    _post_details(author_client, draft, op="add:rubric[0].levels")
    draft.refresh_from_db()
    assert draft.guide["rubric"][0]["levels"][-1]["score"] == 5

    _post_details(author_client, draft, op="add:rubric")
    draft.refresh_from_db()
    assert [lv["label"] for lv in draft.guide["rubric"][1]["levels"]] == [
        "Missing", "Partial", "Solid", "Strong"]


def test_a_button_press_keeps_the_text_typed_with_it(author_client, valid_draft):
    _post_details(author_client, valid_draft, op="add:coding.steps",
                  **{"overview": "Typed just before pressing Add"})
    draft = ExerciseDraft.objects.get(pk=valid_draft.pk)
    assert draft.guide["overview"] == "Typed just before pressing Add"
    assert draft.guide["coding"]["steps"] == ["Read the code.", ""]


def test_browser_line_endings_are_stored_as_in_files(author_client, valid_draft):
    _post_details(author_client, valid_draft, prompt="# Title\r\n\r\nBody\r\n")
    assert ExerciseDraft.objects.get(pk=valid_draft.pk).prompt == "# Title\n\nBody\n"


def test_a_stale_form_saves_nothing_and_shows_what_was_typed(author_client, client, valid_draft,
                                                             author):
    from tests.platform.authoring_fixtures import form_data

    stale = form_data(valid_draft, overview="Mine")
    _post_details(author_client, valid_draft, overview="Theirs")  # someone saves first
    response = author_client.post(f"/authoring/exercises/{valid_draft.slug}/details/", stale)
    assert response.status_code == 409
    html = response.content.decode()
    assert "was NOT saved" in html and "Mine" in html
    assert ExerciseDraft.objects.get(pk=valid_draft.pk).guide["overview"] == "Theirs"


def test_code_files_are_edited_saved_and_conflicts_refused(author_client, new_draft):
    url = f"/authoring/exercises/{new_draft.slug}/files/solution.py"
    page = author_client.get(url).content.decode()
    assert 'class="code-editor"' in page and "build/authoring_editor" in page
    base = services.file_hash(new_draft, "solution.py")
    response = author_client.post(url, {"text": "x = 1\r\n", "base": base})
    assert response.status_code == 302
    assert ExerciseDraft.objects.get(pk=new_draft.pk).files["solution.py"] == "x = 1\n"
    again = author_client.post(url, {"text": "x = 2\n", "base": base})
    assert again.status_code == 409 and "was NOT saved" in again.content.decode()
    assert ExerciseDraft.objects.get(pk=new_draft.pk).files["solution.py"] == "x = 1\n"


def test_an_example_is_added_with_its_expected_verdict(author_client, new_draft):
    response = author_client.post(f"/authoring/exercises/{new_draft.slug}/add-file/", {
        "kind": "example", "name": "skips_a_batch", "title": "Forgets the last batch.",
        "expect": "wrong", "failing": "gradients"})
    assert response.status_code == 302
    text = ExerciseDraft.objects.get(pk=new_draft.pk).files["examples/skips_a_batch.py"]
    assert text.startswith('"""Forgets the last batch.\n\nexpect: wrong\nfailing: gradients\n"""')
    assert "class Trainer" in text  # starts from the starter's code
    refused = author_client.post(f"/authoring/exercises/{new_draft.slug}/add-file/", {
        "kind": "example", "name": "fine", "expect": "wrong", "failing": ""}, follow=True)
    assert "lists the checks that fail" in refused.content.decode()


def test_unsafe_or_reserved_file_names_are_refused(author_client, new_draft):
    for path in ("../x.py", "/etc/passwd", ".hidden.py", "guide.yaml", "a/__pycache__/b.pyc"):
        response = author_client.post(f"/authoring/exercises/{new_draft.slug}/add-file/",
                                      {"kind": "file", "path": path}, follow=True)
        assert "The file name" in response.content.decode(), path
    assert set(ExerciseDraft.objects.get(pk=new_draft.pk).files) == set(new_draft.files)


def test_code_problems_name_the_file_and_line(author_client, new_draft):
    draft = new_draft
    draft.files = {**draft.files, "grader.py": "def broken(:\n",
                   "examples/no_expect.py": '"""Nothing declared."""\n'}
    draft.save()
    problems = _problems(draft)
    assert any(p.startswith("grader.py: line 1: syntax error") for p in problems)
    assert any(p.startswith("examples/no_expect.py: docstring: needs an 'expect: <verdict>'")
               for p in problems)


def test_the_required_files_cannot_be_deleted(author_client, new_draft):
    author_client.post(f"/authoring/exercises/{new_draft.slug}/delete-file/grader.py")
    author_client.post(f"/authoring/exercises/{new_draft.slug}/delete-file/examples/one_worker.py")
    files = ExerciseDraft.objects.get(pk=new_draft.pk).files
    assert "grader.py" in files and "examples/one_worker.py" not in files


def test_preview_renders_markdown_through_the_sanitizer(author_client):
    html = author_client.post("/authoring/preview/", {
        "text": "**bold** <script>alert(1)</script> [x](javascript:alert(1))"}).content.decode()
    assert "<strong>bold</strong>" in html
    assert "<script" not in html and "javascript:" not in html
