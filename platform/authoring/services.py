"""Writes for authoring: drafts, validations, publishing, question banks.

Views call these; every rule lives here. A draft is saved whatever it holds (nothing
typed is lost); validity is decided when validating and publishing, by the same reader
and store as `sync_content`.
"""

import ast
import contextlib
import hashlib
import json
import logging
import re
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from pydantic import ValidationError

from authoring import validation as checks
from authoring.details_form import blank_guide
from authoring.folder import (
    ArchiveError,
    code_path_problem,
    draft_folder,
    folder_data,
    read_folder,
    unpack,
    version_folder,
)
from authoring.models import ExerciseDraft, Publication, Validation, ValidationPart
from catalog.models import Exercise, ExerciseVersion
from catalog.services import exercise_store
from content.errors import Problem, problems_from_validation
from content.fields import SLUG_PATTERN
from overlap import jobs
from qa.models import Question, QuestionBank
from qa.schema import BankQuestion, Challenge

log = logging.getLogger(__name__)

SKELETON = Path(__file__).resolve().parent / "skeleton"
EXAMPLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,60}$")


class Refused(Exception):
    """Nothing was changed; `message` (and `problems`) say why, for the author."""

    def __init__(self, message: str, problems: list[Problem] | None = None):
        self.message = message
        self.problems = problems or []
        super().__init__(message)


class DraftConflict(Refused):
    """Someone saved the same part of the draft since this editor opened it."""


def text_hash(value) -> str:
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


def details_hash(draft: ExerciseDraft) -> str:
    return text_hash([draft.meta, draft.prompt, draft.guide])


def file_hash(draft: ExerciseDraft, path: str) -> str:
    return text_hash(draft.files[path]) if path in draft.files else ""


def _ends_with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def _locked(draft: ExerciseDraft) -> ExerciseDraft:
    return ExerciseDraft.objects.select_for_update().get(pk=draft.pk)


# -- drafts ------------------------------------------------------------------------


def _skeleton_files() -> dict[str, str]:
    return {
        path.relative_to(SKELETON).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(SKELETON.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def draft_create(*, slug: str, title: str, user) -> ExerciseDraft:
    """A new exercise: blank details to fill in, and a small working code side to adapt."""
    slug = slug.strip()
    if not re.match(SLUG_PATTERN, slug):
        raise Refused("The slug must be lower-case letters, digits and hyphens, like "
                      "ring-all-reduce.")
    if Exercise.objects.filter(slug=slug).exists():
        raise Refused(f"An exercise {slug!r} already exists; edit it instead.")
    meta = {"slug": slug, "title": title.strip(), "summary": "", "difficulty": "medium",
            "time_minutes": 15, "tags": [], "track": "simulated"}
    try:
        with transaction.atomic():
            return ExerciseDraft.objects.create(
                slug=slug, meta=meta, prompt="", guide=blank_guide(), files=_skeleton_files(),
                created_by=user, updated_by=user,
            )
    except IntegrityError:
        raise Refused(f"A draft {slug!r} already exists.") from None


def draft_for_exercise(*, exercise: Exercise, user) -> ExerciseDraft:
    """The exercise's draft; the first call copies its current version into one."""
    draft = ExerciseDraft.objects.filter(slug=exercise.slug).first()
    if draft is not None:
        return draft
    version = exercise.current_version
    if version is None:
        raise Refused("This exercise has no version to edit.")
    data = _version_data(version)
    try:
        with transaction.atomic():
            return ExerciseDraft.objects.create(
                slug=exercise.slug, exercise=exercise, based_on=version, created_by=user,
                updated_by=user, **data,
            )
    except IntegrityError:  # created meanwhile by another request
        return ExerciseDraft.objects.get(slug=exercise.slug)


def _version_data(version: ExerciseVersion) -> dict:
    result = read_folder(version.exercise.slug, version_folder(version))
    if result.folder is None:  # a version always passed the schema; keep it as stored
        return {"meta": {}, "prompt": version.prompt, "guide": version.guide,
                "files": dict(version.files)}
    return folder_data(result.folder)


def draft_save_details(*, draft: ExerciseDraft, meta: dict, prompt: str, guide: dict,
                       base: str, user) -> ExerciseDraft:
    """Save the details as typed. `base` is details_hash() when the form was opened; if
    the details changed since, nothing is saved (DraftConflict)."""
    with transaction.atomic():
        current = _locked(draft)
        if base != details_hash(current):
            who = current.updated_by.get_username() if current.updated_by else "someone"
            raise DraftConflict(
                f"{who} saved these details at {current.updated_at:%H:%M:%S} since you opened "
                "them. Your version is below and was NOT saved: check it, then save again to "
                "replace theirs."
            )
        current.meta = {"slug": current.slug, **{k: v for k, v in meta.items() if k != "slug"}}
        current.prompt = prompt
        current.guide = guide
        current.updated_by = user
        current.save(update_fields=["meta", "prompt", "guide", "updated_by", "updated_at"])
    return current


def draft_save_file(*, draft: ExerciseDraft, path: str, text: str, base: str,
                    user) -> ExerciseDraft:
    text = _ends_with_newline(text.replace("\r\n", "\n").replace("\r", "\n"))
    if len(text.encode()) > settings.OVERLAP_MAX_CODE_BYTES * 4:
        raise Refused(f"{path} is larger than {settings.OVERLAP_MAX_CODE_BYTES * 4 // 1024} KiB.")
    with transaction.atomic():
        current = _locked(draft)
        if path not in current.files:
            raise Refused(f"{path} is not a file of this draft (deleted meanwhile?).")
        if base != file_hash(current, path):
            who = current.updated_by.get_username() if current.updated_by else "someone"
            raise DraftConflict(
                f"{who} changed {path} at {current.updated_at:%H:%M:%S} since you opened it. "
                "Your text is below and was NOT saved: check it, then save again to replace "
                "theirs."
            )
        current.files = {**current.files, path: text}
        current.updated_by = user
        current.save(update_fields=["files", "updated_by", "updated_at"])
    return current


def draft_add_file(*, draft: ExerciseDraft, path: str, text: str, user) -> ExerciseDraft:
    path = path.strip()
    problem = code_path_problem(path)
    if problem:
        raise Refused(f"The file name {problem}.")
    with transaction.atomic():
        current = _locked(draft)
        if path in current.files:
            raise Refused(f"{path} already exists.")
        current.files = dict(sorted({**current.files, path: _ends_with_newline(text)}.items()))
        current.updated_by = user
        current.save(update_fields=["files", "updated_by", "updated_at"])
    return current


def _without_docstring(source: str) -> str:
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return "\n".join(source.splitlines()[body[0].end_lineno:]).lstrip("\n")
    return source


def draft_add_example(*, draft: ExerciseDraft, name: str, title: str, expect: str,
                      failing: str, user) -> tuple[ExerciseDraft, str]:
    """A new example declaring its verdict, starting from the starter's code."""
    name = name.strip().removesuffix(".py")
    if not EXAMPLE_NAME.match(name):
        raise Refused("An example's name is a Python module name: lower-case letters, digits "
                      "and underscores, like race_no_lock.")
    if expect not in checks.EXAMPLE_VERDICTS:
        verdicts = ", ".join(checks.EXAMPLE_VERDICTS)
        raise Refused(f"Choose the verdict the example must get ({verdicts}).")
    title = " ".join(title.split()) or "An example solution."
    names = sorted({n.strip() for n in re.split(r"[\s,]+", failing) if n.strip()})
    if expect == "wrong" and not names:
        raise Refused("A 'wrong' example lists the checks that fail (e.g. accumulation).")
    if expect != "wrong" and names:
        raise Refused("Only a 'wrong' example lists failing checks.")
    header = f'"""{title}\n\nexpect: {expect}\n'
    if names:
        header += f"failing: {', '.join(names)}\n"
    header += '"""\n\n'
    body = _without_docstring(draft.files.get("starter.py", ""))
    path = f"examples/{name}.py"
    return draft_add_file(draft=draft, path=path, text=header + body, user=user), path


def draft_delete_file(*, draft: ExerciseDraft, path: str, user) -> ExerciseDraft:
    if path in checks.REQUIRED:
        raise Refused(f"{path} is part of every exercise and cannot be deleted.")
    with transaction.atomic():
        current = _locked(draft)
        if path not in current.files:
            raise Refused(f"{path} is not a file of this draft.")
        current.files = {k: v for k, v in current.files.items() if k != path}
        current.updated_by = user
        current.save(update_fields=["files", "updated_by", "updated_at"])
    return current


def draft_discard(*, draft: ExerciseDraft) -> None:
    """Forget the draft (published versions stay)."""
    ExerciseDraft.objects.filter(pk=draft.pk).delete()


def draft_import(*, data: bytes, user, replace: bool = False) -> ExerciseDraft:
    """A draft from a `<slug>/` zip, read exactly as sync_content reads a folder."""
    try:
        slug, files = unpack(data)
    except ArchiveError as exc:
        raise Refused(str(exc)) from None
    result = read_folder(slug, files)
    if result.folder is None:
        raise Refused(f"The archive's exercise {slug!r} has problems; nothing was imported.",
                      result.problems)
    fields = folder_data(result.folder)
    with transaction.atomic():
        draft = ExerciseDraft.objects.select_for_update().filter(slug=slug).first()
        exercise = Exercise.objects.filter(slug=slug).first()
        if draft is not None:
            if not replace and _has_changes(draft):
                raise Refused(
                    f"The draft of {slug!r} has unpublished changes. Publish or discard them "
                    "first, or tick \"Replace my draft\" to overwrite them with the archive.")
            for name, value in fields.items():
                setattr(draft, name, value)
            draft.updated_by = user
            draft.save()
            return draft
        return ExerciseDraft.objects.create(
            slug=slug, exercise=exercise,
            based_on=exercise.current_version if exercise else None,
            created_by=user, updated_by=user, **fields,
        )


def _has_changes(draft: ExerciseDraft) -> bool:
    if draft.based_on is None:
        return True
    return draft_folder(draft) != version_folder(draft.based_on)


# -- validation ---------------------------------------------------------------------


def validation_request(*, draft: ExerciseDraft, user) -> Validation:
    """Queue a validation of the draft's files as they are now."""
    problems, parts = checks.plan(draft.slug, draft.files)
    if problems:
        raise Refused("The code cannot be validated yet:", problems)
    content_hash = read_folder(draft.slug, draft_folder(draft)).content_hash
    with transaction.atomic():
        _locked(draft)
        if draft.validations.filter(status__in=Validation.ACTIVE).exists():
            raise Refused("A validation is already running; wait for its result.")
        validation = Validation.objects.create(
            draft=draft, content_hash=content_hash, files=dict(draft.files),
            queue=validation_queue(draft), requested_by=user,
        )
        ValidationPart.objects.bulk_create(
            ValidationPart(validation=validation, position=i, file=part.file,
                           expected=part.expected, expected_failing=list(part.expected_failing))
            for i, part in enumerate(parts)
        )
        transaction.on_commit(lambda: _enqueue_new(validation))
    return validation


def validation_queue(draft: ExerciseDraft) -> str:
    """Authors' validations have their own queue, so they never delay a candidate's run
    (GPU exercises need a GPU worker)."""
    return "gpu" if draft.track == "gpu" else "authoring"


def validation_enqueue(*, validation: Validation, now=None) -> None:
    """Send the next step's message (raises jobs.BrokerUnavailable when Redis is down)."""
    from authoring.tasks import validation_step_task

    limit = settings.OVERLAP_GPU_TASK_TIME_LIMIT if validation.queue == "gpu" else \
        settings.CELERY_TASK_TIME_LIMIT
    jobs.send(validation_step_task, Validation, validation.pk, queue=validation.queue,
              time_limit=limit, now=now)


def _enqueue_new(validation: Validation) -> None:
    """After the commit: send, or fail the validation at once (it must not block the next
    one) and tell the author."""
    try:
        validation_enqueue(validation=validation)
    except jobs.BrokerUnavailable as exc:
        _validation_fail(validation.pk, f"the broker could not be reached: {exc}")
        raise Refused("The validation service is unavailable right now (Redis cannot be "
                      "reached); nothing was queued. Try again in a minute.") from exc


def _send_next(validation: Validation) -> None:
    """A step's follow-up: when the broker is down, recovery sends it again later."""
    with contextlib.suppress(jobs.BrokerUnavailable):
        validation_enqueue(validation=validation)


def validation_step(*, validation_id: int) -> None:
    """Grade the next file of a validation, then queue the next step (or finish).

    Each step claims its file with a guarded update, so a redelivered message never grades
    a file twice; a step that finds nothing to claim does nothing."""
    now = timezone.now()
    Validation.objects.filter(pk=validation_id, status=Validation.QUEUED).update(
        status=Validation.RUNNING, started_at=now, updated_at=now)
    validation = Validation.objects.select_related("draft").filter(pk=validation_id).first()
    if validation is None or validation.status != Validation.RUNNING:
        return
    part = validation.parts.filter(status=ValidationPart.PENDING).order_by("position").first()
    if part is None:
        if not validation.parts.filter(status=ValidationPart.RUNNING).exists():
            _validation_finish(validation.pk)
        return
    if not jobs.claim(ValidationPart.objects.filter(pk=part.pk, status=ValidationPart.PENDING),
                      status=ValidationPart.RUNNING, started_at=now, heartbeat_at=now,
                      attempts=jobs.bump_attempts()):
        return
    Validation.objects.filter(pk=validation.pk).update(updated_at=now)
    plan = checks.PartPlan(part.file, part.expected, tuple(part.expected_failing))
    with jobs.heartbeat(ValidationPart, part.pk, running_status=ValidationPart.RUNNING):
        try:
            result = checks.grade_part(slug=validation.draft.slug, files=validation.files,
                                       part=plan)
        except checks.SandboxMissing as exc:
            log.warning("validation %s: no sandbox: %s", validation.pk, exc)
            _validation_fail(validation.pk, f"No sandbox could run the validation: {exc}")
            return
        except Exception as exc:  # our bug: never leave the validation running
            log.exception("validation %s: internal error", validation.pk)
            _validation_fail(validation.pk, f"{type(exc).__name__}: {exc}")
            raise
    outcome = checks.judge(plan, result)
    ValidationPart.objects.filter(pk=part.pk, status=ValidationPart.RUNNING).update(
        status=ValidationPart.DONE, verdict=outcome.verdict[:64], failing=outcome.failing,
        speedup=outcome.speedup, target_speedup=outcome.target_speedup,
        message=outcome.message, checks=outcome.checks, ok=outcome.ok,
        problem=outcome.problem, backend=outcome.backend[:16], finished_at=timezone.now(),
    )
    if outcome.exercise_broken:
        validation.parts.filter(status=ValidationPart.PENDING).update(
            status=ValidationPart.SKIPPED)
    if validation.parts.filter(status=ValidationPart.PENDING).exists():
        Validation.objects.filter(pk=validation.pk).update(updated_at=timezone.now())
        transaction.on_commit(lambda: _send_next(validation))
    elif not validation.parts.filter(status=ValidationPart.RUNNING).exists():
        # Finished only when no file is still grading (a retried step may be): the step
        # that ends the last one finishes it, never one while a file is graded.
        _validation_finish(validation.pk)


def _validation_finish(validation_id: int) -> None:
    parts = list(ValidationPart.objects.filter(validation_id=validation_id))
    failed = [p for p in parts if p.status == ValidationPart.DONE and not p.ok]
    skipped = [p for p in parts if p.status == ValidationPart.SKIPPED]
    passed = not failed and not skipped and bool(parts)
    if passed:
        message = f"All {len(parts)} files got their expected verdicts."
    else:
        names = ", ".join(p.file for p in failed)
        message = f"{len(failed)} of {len(parts)} files did not get their expected verdict: " \
                  f"{names}."
        if skipped:
            message += f" {len(skipped)} not graded (the exercise itself failed)."
    now = timezone.now()
    Validation.objects.filter(pk=validation_id, status=Validation.RUNNING).update(
        status=Validation.DONE, passed=passed, message=message, finished_at=now, updated_at=now)


def _validation_fail(validation_id: int, error: str) -> None:
    now = timezone.now()
    ValidationPart.objects.filter(
        validation_id=validation_id,
        status__in=(ValidationPart.PENDING, ValidationPart.RUNNING),
    ).update(status=ValidationPart.SKIPPED)
    Validation.objects.filter(pk=validation_id, status__in=Validation.ACTIVE).update(
        status=Validation.INTERNAL_ERROR, passed=False, error=error[:4000],
        message="Something went wrong on our side while validating; it says nothing about "
                "the exercise. Run the validation again.",
        finished_at=now, updated_at=now,
    )


def validations_recover(*, now=None, validation_ids=None) -> dict[str, int]:
    """Nothing stays stuck (the lifecycle in overlap/jobs.py, as for runs): a step whose
    message was lost is sent again, at most once per window; a file whose worker stopped
    beating is retried, then failed clearly. Called by Celery beat and at worker start."""
    now = now or timezone.now()
    validations = Validation.objects.filter(status__in=Validation.ACTIVE)
    if validation_ids is not None:
        validations = validations.filter(pk__in=validation_ids)
    counts = {"requeued": 0, "retried": 0, "failed": 0}
    running = ValidationPart.objects.filter(validation__in=validations,
                                            status=ValidationPart.RUNNING)
    for part in jobs.dead(running, now=now).select_related("validation"):
        validation = part.validation
        if jobs.attempts_left(part):
            if jobs.claim(ValidationPart.objects.filter(pk=part.pk,
                                                        status=ValidationPart.RUNNING),
                          status=ValidationPart.PENDING, heartbeat_at=None):
                Validation.objects.filter(pk=validation.pk).update(updated_at=now)
                _send_next(validation)
                counts["retried"] += 1
        elif ValidationPart.objects.filter(pk=part.pk, status=ValidationPart.RUNNING).update(
                status=ValidationPart.DONE, verdict="internal_error", ok=False,
                problem=f"The worker grading {part.file} stopped before finishing (tried "
                        f"{part.attempts} times).", finished_at=now):
            _validation_fail(validation.pk, f"worker lost while grading {part.file}")
            counts["failed"] += 1
    idle = validations.exclude(parts__status=ValidationPart.RUNNING)
    counts["requeued"], _broker_up = jobs.requeue_lost(
        idle, lambda validation: validation_enqueue(validation=validation, now=now), now=now
    )
    return counts  # with the broker down, the next beat tries again


# -- publishing ---------------------------------------------------------------------


def draft_publish(*, draft: ExerciseDraft, user) -> ExerciseVersion:
    """A new immutable version from the draft: only valid content, only when the latest
    validation passed on exactly this content. Stored by the catalog's own store."""
    from authoring.selectors import draft_state

    with transaction.atomic():
        draft = _locked(draft)
        state = draft_state(draft)
        if state.problems:
            raise Refused(f"The draft has {len(state.problems)} problem"
                          f"{'s' if len(state.problems) != 1 else ''}; nothing was published.",
                          state.problems)
        if not state.changed:
            raise Refused(f"Nothing to publish: the draft is the same as "
                          f"v{draft.based_on.number}.")
        latest = state.latest_validation
        if latest is None:
            raise Refused("Validate the draft first: publishing needs a passed validation.")
        if latest.content_hash != state.content_hash:
            raise Refused("The draft changed since its latest validation; validate it again "
                          "before publishing.")
        if latest.is_active:
            raise Refused("The validation is still running; publish when it has passed.")
        if not latest.passed:
            raise Refused(f"The latest validation did not pass: {latest.message}")
        outcome = exercise_store(folder=state.read.folder)
        if outcome == "unchanged":
            raise Refused("Nothing to publish: this content is already the current version.")
        exercise = Exercise.objects.get(slug=draft.slug)
        version = exercise.current_version
        Publication.objects.create(version=version, validation=latest, published_by=user)
        draft.exercise, draft.based_on = exercise, version
        draft.save(update_fields=["exercise", "based_on", "updated_at"])
    return version


# -- question banks ---------------------------------------------------------------------


def _tags(value: str) -> list[str]:
    return [tag for tag in re.split(r"[\s,]+", value.strip()) if tag]


def bank_save(*, slug: str, title: str, description: str, bank: QuestionBank | None = None
              ) -> QuestionBank:
    problems = []
    slug = bank.slug if bank else slug.strip()
    if not re.match(SLUG_PATTERN, slug):
        problems.append(Problem("bank", "slug", "must be lower-case letters, digits and "
                                                "hyphens"))
    for name, value in (("title", title), ("description", description)):
        if not value.strip():
            problems.append(Problem("bank", name, "must not be empty"))
    if bank is None and QuestionBank.objects.filter(slug=slug).exists():
        problems.append(Problem("bank", "slug", f"a bank {slug!r} already exists"))
    if problems:
        raise Refused("The bank was not saved:", problems)
    if bank is None:
        bank = QuestionBank(slug=slug, content_hash="")
    bank.title = title.strip()
    bank.description = description.replace("\r\n", "\n").strip()
    bank.save()
    return bank


QUESTION_FIELDS = ("key", "topic", "tags", "question", "answer")
CHALLENGE_FIELDS = ("key", "topic", "tags", "title", "scenario", "root_cause", "solution")


def question_save(*, bank: QuestionBank, kind: str, data: dict,
                  question: Question | None = None) -> Question:
    """Add or edit a question or a production challenge, validated by the bank file's own
    schema. Interviewers' searches read the same rows, so they see it at once."""
    schema = Challenge if kind == Question.CHALLENGE else BankQuestion
    fields = CHALLENGE_FIELDS if kind == Question.CHALLENGE else QUESTION_FIELDS
    values = {name: str(data.get(name, "")).replace("\r\n", "\n") for name in fields}
    values["tags"] = _tags(values["tags"])
    if question is not None:
        values["key"] = question.key  # a key is a stable identity: never renamed
    try:
        parsed = schema.model_validate(values)
    except ValidationError as exc:
        raise Refused("Not saved:", problems_from_validation(kind, exc)) from None
    row = {
        "kind": kind, "topic": parsed.topic, "tags": list(parsed.tags),
        "text": parsed.title if kind == Question.CHALLENGE else parsed.question,
        "answer": parsed.solution if kind == Question.CHALLENGE else parsed.answer,
        "scenario": parsed.scenario if kind == Question.CHALLENGE else "",
        "root_cause": parsed.root_cause if kind == Question.CHALLENGE else "",
    }
    with transaction.atomic():
        if question is None:
            if bank.questions.filter(key=parsed.key).exists():
                raise Refused("Not saved:", [Problem(kind, "key", f"{parsed.key!r} is already "
                                                     "used in this bank (keys are unique, "
                                                     "retired ones included)")])
            last = bank.questions.filter(kind=kind).aggregate(last=Max("position"))["last"]
            return Question.objects.create(bank=bank, key=parsed.key,
                                           position=0 if last is None else last + 1, **row)
        Question.objects.filter(pk=question.pk).update(**row)
        question.refresh_from_db()
        return question


def question_set_retired(*, question: Question, retired: bool) -> None:
    """Retired questions leave browsing and search; sessions that asked them keep them."""
    Question.objects.filter(pk=question.pk).update(retired=retired)
