"""Reads for authoring: a draft's state (problems, changes, validation), versions, diffs."""

import difflib
import re
from dataclasses import dataclass, field

from django.db.models import Max, QuerySet
from django.shortcuts import get_object_or_404

from authoring.details_form import field_id
from authoring.folder import (
    GUIDE_FILE,
    META_FILE,
    PROMPT_FILE,
    ReadResult,
    draft_folder,
    dump_yaml,
    read_folder,
    version_folder,
)
from authoring.models import ExerciseDraft, Validation
from authoring.validation import code_problems
from catalog.models import Exercise, ExerciseVersion
from catalog.selectors import repository_newer
from content.errors import Problem
from qa.models import Question, QuestionBank


def friendly(message: str) -> str:
    """Pydantic's wording -> what an author can act on."""
    if message.startswith("String should have at least 1 character"):
        return "must not be empty"
    too_short = re.match(r"List should have at least (\d+) items?", message)
    if too_short:
        count = int(too_short.group(1))
        return f"needs at least {count} entr{'y' if count == 1 else 'ies'}"
    if message.startswith("String should match pattern '^[a-z0-9]"):
        return "must be lower-case letters, digits and hyphens (like ring-all-reduce)"
    if message.startswith("Input should be a valid integer"):
        return "must be a whole number"
    return message.removeprefix("Value error, ")


@dataclass
class ShownProblem:
    file: str  # inside the exercise folder: guide.yaml, examples/x.py
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"

    @property
    def form_field(self) -> str:
        """The details form's input this problem belongs to ('' if none)."""
        if self.file == PROMPT_FILE:
            return "prompt"
        if self.file == META_FILE:
            return self.field.split("[")[0] if self.field.startswith("tags") else self.field
        if self.file == GUIDE_FILE:
            if self.field == "(top level)":
                return "rubric" if self.message.startswith("rubric keys") else ""
            return self.field
        return ""

    @property
    def anchor(self) -> str:
        return field_id(self.form_field) if self.form_field else ""


def shown(problems: list[Problem], slug: str) -> list[ShownProblem]:
    prefix = f"exercises/{slug}/"
    return [
        ShownProblem(p.file.removeprefix(prefix), p.field, friendly(p.message)) for p in problems
    ]


@dataclass
class DraftState:
    draft: ExerciseDraft
    files: dict[str, bytes]
    read: ReadResult
    problems: list[ShownProblem]
    content_hash: str
    changed: bool
    latest_validation: Validation | None
    errors: dict[str, list[str]] = field(default_factory=dict)

    @property
    def validated(self) -> bool:
        v = self.latest_validation
        return bool(v and v.passed and v.content_hash == self.content_hash)

    @property
    def validation_is_current(self) -> bool:
        v = self.latest_validation
        return bool(v and v.content_hash == self.content_hash)

    @property
    def publish_blocker(self) -> str:
        if self.problems:
            return "Fix the problems listed above first."
        if not self.changed:
            return "Nothing to publish: the draft is the same as the current version."
        v = self.latest_validation
        if v is None:
            return "Validate the draft first."
        if v.content_hash != self.content_hash:
            return "The draft changed since its latest validation: validate it again."
        if v.is_active:
            return "Wait for the validation to finish."
        if not v.passed:
            return "The latest validation did not pass."
        return ""


def draft_state(draft: ExerciseDraft) -> DraftState:
    files = draft_folder(draft)
    read = read_folder(draft.slug, files)
    problems = shown(read.problems, draft.slug) + shown(code_problems(draft.slug, draft.files),
                                                         draft.slug)
    errors: dict[str, list[str]] = {}
    for problem in problems:
        if problem.form_field:
            errors.setdefault(problem.form_field, []).append(problem.message)
    changed = draft.based_on is None or files != version_folder(draft.based_on)
    return DraftState(
        draft=draft, files=files, read=read, problems=problems, content_hash=read.content_hash,
        changed=changed, latest_validation=draft.validations.first(), errors=errors,
    )


def draft_get(slug: str) -> ExerciseDraft:
    return get_object_or_404(ExerciseDraft.objects.select_related("based_on", "exercise"),
                             slug=slug)


@dataclass
class ExerciseRow:
    slug: str
    title: str
    exercise: Exercise | None
    draft: ExerciseDraft | None
    # A newer folder from the repository that sync_content did not make current.
    repository_version: ExerciseVersion | None = None


def exercise_rows() -> list[ExerciseRow]:
    """Every exercise and every draft, one row per slug."""
    drafts = {d.slug: d for d in ExerciseDraft.objects.all()}
    newer = repository_newer()
    rows = [
        ExerciseRow(e.slug, e.title, e, drafts.pop(e.slug, None), newer.get(e.pk))
        for e in Exercise.objects.select_related("current_version")
    ]
    rows += [ExerciseRow(d.slug, d.title, None, d) for d in drafts.values()]
    return sorted(rows, key=lambda row: row.title.lower())


def next_version_number(slug: str) -> int:
    latest = ExerciseVersion.objects.filter(exercise__slug=slug).aggregate(n=Max("number"))["n"]
    return (latest or 0) + 1


def versions(exercise: Exercise) -> QuerySet[ExerciseVersion]:
    return exercise.versions.select_related("publication__published_by").order_by("-number")


# -- diff ---------------------------------------------------------------------------


@dataclass
class FileDiff:
    path: str
    status: str  # added, removed, changed
    lines: list[tuple[str, str]]  # (kind: add/del/hunk/ctx, text)


def side_files(slug: str, side: str) -> tuple[str, dict[str, bytes]] | None:
    """('v3', files) or ('draft', files) for one side of a diff; None if there is none."""
    if side == "draft":
        draft = ExerciseDraft.objects.filter(slug=slug).first()
        return ("draft", draft_folder(draft)) if draft else None
    match = re.fullmatch(r"v(\d+)", side)
    if not match:
        return None
    version = ExerciseVersion.objects.filter(exercise__slug=slug,
                                             number=int(match.group(1))).first()
    return (f"v{version.number}", version_folder(version)) if version else None


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def files_diff(old: dict[str, bytes], new: dict[str, bytes], *, context: int = 3
               ) -> list[FileDiff]:
    """A unified diff per changed file of the exported folders (text only; the template
    escapes it)."""
    diffs = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "changed"
        lines = []
        for line in list(difflib.unified_diff(_lines(a), _lines(b), lineterm="", n=context))[2:]:
            kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
            lines.append((kind, line))
        diffs.append(FileDiff(path, status, lines))
    return diffs


# -- question banks ---------------------------------------------------------------------


def bank_questions(bank: QuestionBank) -> QuerySet[Question]:
    """All of a bank's questions and challenges, retired ones included (last)."""
    return bank.questions.order_by("retired", "-kind", "position")


def bank_export(bank: QuestionBank) -> str:
    """The bank as its `question-banks/<slug>.yaml` file (live questions only)."""
    live = bank.questions.filter(retired=False).order_by("kind", "position")
    data = {
        "slug": bank.slug,
        "title": bank.title,
        "description": bank.description,
        "questions": [
            {"key": q.key, "topic": q.topic, "tags": list(q.tags), "question": q.text,
             "answer": q.answer}
            for q in live if q.kind == Question.QUESTION
        ],
        "challenges": [
            {"key": q.key, "topic": q.topic, "tags": list(q.tags), "title": q.text,
             "scenario": q.scenario, "root_cause": q.root_cause, "solution": q.answer}
            for q in live if q.kind == Question.CHALLENGE
        ],
        "checklist": [{"title": item.title, "advice": item.advice}
                      for item in bank.checklist.all()],
    }
    for key in ("challenges", "checklist"):
        if not data[key]:
            del data[key]
    return dump_yaml(data)
