"""sync_content: good, idempotent, versioned, and all-or-nothing on broken files."""

from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from catalog.models import Exercise, ExerciseVersion
from content.errors import ContentError
from content.services import content_sync
from qa.models import ChecklistItem, Question, QuestionBank

pytestmark = pytest.mark.django_db

# The exercises entered from the seed guides (others, such as authored ones, may exist too).
SEED_SLUGS = ["async-gradient-accumulation", "async-parameter-server", "pipeline-model-parallel"]


def _edit_yaml(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _snapshot():
    return (
        list(ExerciseVersion.objects.values_list("exercise__slug", "number", "content_hash")),
        list(Question.objects.values_list("bank__slug", "key", "text", "answer", "retired")),
        list(ChecklistItem.objects.values_list("bank__slug", "position", "title")),
    )


def test_loads_all_seed_content(content_dir):
    content_sync(root=content_dir)
    loaded = set(Exercise.objects.values_list("slug", flat=True))
    assert set(SEED_SLUGS) <= loaded
    assert loaded == {p.name for p in content_dir.iterdir()
                      if p.is_dir() and p.name != "question-banks"}
    for exercise in Exercise.objects.filter(slug__in=SEED_SLUGS):
        guide = exercise.current_version.guide
        assert len(guide["hints"]) == 4, exercise.slug
        assert len(guide["followups"]["questions"]) == 3, exercise.slug
        assert len(guide["applications"]["items"]) == 8, exercise.slug
        assert guide["rubric"] and all(len(c["levels"]) >= 2 for c in guide["rubric"])
        assert exercise.time_minutes == 15
    distributed = QuestionBank.objects.get(slug="distributed-training")
    efficient = QuestionBank.objects.get(slug="efficient-training")
    assert distributed.questions.filter(kind="question").count() == 21
    assert efficient.questions.filter(kind="question").count() == 5
    assert efficient.questions.filter(kind="challenge").count() == 5
    assert efficient.checklist.count() == 7


def test_second_sync_changes_nothing(content_dir):
    content_sync(root=content_dir)
    before = _snapshot()
    report = content_sync(root=content_dir)
    assert report.changed == 0
    assert all(line.endswith("unchanged") for line in report.lines)
    assert _snapshot() == before


def test_edited_exercise_becomes_a_new_version_and_keeps_the_old(content_dir):
    content_sync(root=content_dir)
    prompt = content_dir / "pipeline-model-parallel" / "prompt.md"
    old_text = prompt.read_text()
    prompt.write_text(old_text + "\nOne more sentence for the candidate.\n")

    report = content_sync(root=content_dir)

    assert "exercise pipeline-model-parallel: new version v2" in report.lines
    exercise = Exercise.objects.get(slug="pipeline-model-parallel")
    assert exercise.current_version.number == 2
    assert exercise.current_version.prompt.endswith("One more sentence for the candidate.\n")
    assert exercise.versions.get(number=1).prompt == old_text
    # The others did not move.
    assert ExerciseVersion.objects.filter(exercise__slug="async-parameter-server").count() == 1


def test_a_code_file_change_is_a_new_version_too(content_dir):
    content_sync(root=content_dir)
    (content_dir / "async-parameter-server" / "notes.py").write_text("X = 1\n")
    content_sync(root=content_dir)
    current = Exercise.objects.get(slug="async-parameter-server").current_version
    assert current.number == 2
    assert current.files["notes.py"] == "X = 1\n"


def test_question_removed_from_file_is_retired_not_deleted(content_dir):
    content_sync(root=content_dir)
    path = content_dir / "question-banks" / "distributed-training.yaml"
    gone = yaml.safe_load(path.read_text())["questions"][0]["key"]
    _edit_yaml(path, lambda d: d["questions"].pop(0))
    content_sync(root=content_dir)
    question = Question.objects.get(bank__slug="distributed-training", key=gone)
    assert question.retired
    assert Question.objects.filter(bank__slug="distributed-training", retired=False).count() == 20


def _problems(content_dir):
    with pytest.raises(ContentError) as caught:
        content_sync(root=content_dir)
    return [str(p) for p in caught.value.problems]


def test_yaml_syntax_error_names_file_and_line(content_dir):
    path = content_dir / "async-parameter-server" / "guide.yaml"
    path.write_text(path.read_text() + "\nbroken: [unclosed\n")
    problems = _problems(content_dir)
    assert len(problems) == 1
    assert problems[0].startswith("exercises/async-parameter-server/guide.yaml: line ")
    assert "invalid YAML" in problems[0]


def test_missing_field_is_named(content_dir):
    _edit_yaml(content_dir / "pipeline-model-parallel" / "guide.yaml",
               lambda d: d["hints"][2].pop("expected_answer"))
    assert _problems(content_dir) == [
        "exercises/pipeline-model-parallel/guide.yaml: hints[2].expected_answer: "
        "required field is missing"
    ]


def test_unknown_field_is_named(content_dir):
    _edit_yaml(content_dir / "async-gradient-accumulation" / "exercise.yaml",
               lambda d: d.update(dificulty="hard"))
    problems = _problems(content_dir)
    assert problems == [
        "exercises/async-gradient-accumulation/exercise.yaml: dificulty: unknown field "
        "(check its spelling against exercises/README.md)"
    ]


def test_wrong_value_is_named_with_what_is_allowed(content_dir):
    _edit_yaml(content_dir / "async-gradient-accumulation" / "exercise.yaml",
               lambda d: d.update(difficulty="extreme"))
    [problem] = _problems(content_dir)
    assert problem.startswith("exercises/async-gradient-accumulation/exercise.yaml: difficulty:")
    assert "'easy', 'medium' or 'hard'" in problem


def test_rubric_levels_out_of_order_are_refused(content_dir):
    def shuffle(d):
        d["rubric"][0]["levels"].reverse()
    _edit_yaml(content_dir / "async-parameter-server" / "guide.yaml", shuffle)
    [problem] = _problems(content_dir)
    assert "guide.yaml: rubric[0].levels:" in problem
    assert "unique and ascending" in problem


def test_empty_hint_is_refused(content_dir):
    _edit_yaml(content_dir / "async-parameter-server" / "guide.yaml",
               lambda d: d["hints"][0].update(prompt="   "))
    [problem] = _problems(content_dir)
    assert problem.startswith("exercises/async-parameter-server/guide.yaml: hints[0].prompt:")


def test_slug_must_match_folder(content_dir):
    _edit_yaml(content_dir / "async-parameter-server" / "exercise.yaml",
               lambda d: d.update(slug="another-name"))
    assert _problems(content_dir) == [
        "exercises/async-parameter-server/exercise.yaml: slug: must equal the folder name "
        "'async-parameter-server', got 'another-name'"
    ]


def test_missing_prompt_file_is_named(content_dir):
    (content_dir / "pipeline-model-parallel" / "prompt.md").unlink()
    assert _problems(content_dir) == [
        "exercises/pipeline-model-parallel/prompt.md: file is missing"
    ]


def test_duplicate_question_keys_are_refused(content_dir):
    def duplicate(d):
        d["questions"][1]["key"] = d["questions"][0]["key"]
    _edit_yaml(content_dir / "question-banks" / "distributed-training.yaml", duplicate)
    [problem] = _problems(content_dir)
    assert problem.startswith("exercises/question-banks/distributed-training.yaml:")
    assert "keys must be unique" in problem


def test_every_problem_is_reported_at_once(content_dir):
    (content_dir / "pipeline-model-parallel" / "prompt.md").unlink()
    _edit_yaml(content_dir / "async-parameter-server" / "exercise.yaml",
               lambda d: d.pop("title"))
    assert len(_problems(content_dir)) == 2


def test_a_broken_file_loads_nothing_at_all(content_dir):
    content_sync(root=content_dir)
    before = _snapshot()
    (content_dir / "pipeline-model-parallel" / "prompt.md").write_text("Edited.\n")
    _edit_yaml(content_dir / "question-banks" / "efficient-training.yaml",
               lambda d: d["questions"][0].update(answer=""))
    with pytest.raises(ContentError):
        content_sync(root=content_dir)
    # The valid edit to pipeline-model-parallel was not half-applied either.
    assert _snapshot() == before


def test_command_reports_problems_and_fails(content_dir):
    (content_dir / "pipeline-model-parallel" / "prompt.md").unlink()
    err = StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("sync_content", dir=content_dir, stderr=err)
    assert "prompt.md: file is missing" in err.getvalue()
    assert Exercise.objects.count() == 0


def test_command_check_validates_without_writing(content_dir):
    out = StringIO()
    call_command("sync_content", dir=content_dir, check=True, stdout=out)
    assert "Content checked." in out.getvalue()
    assert Exercise.objects.count() == 0
