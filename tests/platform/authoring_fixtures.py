"""Fixtures for the authoring tests (use with `pytest_plugins = [...]` in a test module)."""

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from authoring import services
from authoring.models import ExerciseDraft
from runner.sandbox.backends.base import sandbox_python

REPO = Path(__file__).resolve().parents[2]
# The runner's own interpreter (torch), found as the sandboxes find it:
# OVERLAP_RUNNER_PYTHON (the Makefile exports it), else .venv-runner.
RUNNER_PYTHON = Path(sandbox_python())


@pytest.fixture
def author_client(client, author):
    client.force_login(author)
    return client


@pytest.fixture
def interviewer_client(interviewer):
    """A second browser, an interviewer's, beside the author's."""
    from django.test import Client

    other = Client()
    other.force_login(interviewer)
    return other


@pytest.fixture
def superuser(db) -> User:
    return User.objects.create_superuser("root", password="correct horse battery")


@pytest.fixture
def new_draft(author) -> ExerciseDraft:
    """A brand-new exercise's draft: blank details, the skeleton's working code."""
    return services.draft_create(slug="tiny-workers", title="Tiny workers", user=author)


VALID_GUIDE = {
    "overview": "Two workers, four batches.",
    "introduction": {"minutes": 2, "script": "Say hello."},
    "coding": {"minutes": 10, "steps": ["Read the code."], "watch_for": ["Tasks per worker."]},
    "hints": [
        {"prompt": "What runs at the same time?", "expected_answer": "The workers."},
        {"prompt": "How many batches per worker?", "expected_answer": "One at a time."},
    ],
    "walkthrough": {
        "basic_structure": ["One task per worker."],
        "key_points": ["`asyncio.gather`."],
        "expected_performance": "About 2x.",
    },
    "rubric": [
        {
            "key": "concurrency",
            "title": "Concurrency",
            "description": "Runs the workers at once.",
            "levels": [
                {"score": 1, "label": "Missing", "description": "Sequential."},
                {"score": 2, "label": "Partial", "description": "Some overlap."},
                {"score": 3, "label": "Solid", "description": "Both workers busy."},
                {"score": 4, "label": "Strong", "description": "And explains why."},
            ],
        }
    ],
    "followups": {"minutes": 3, "questions": [{"question": "More workers?",
                                                "good_answer": "Scales until batches run out."}]},
    "applications": {"items": [{"title": "Data parallelism", "description": "Everywhere."}]},
}


def fill_valid(draft: ExerciseDraft) -> ExerciseDraft:
    """Give a new draft valid details (its code is the skeleton's, already valid)."""
    draft.meta = {**draft.meta, "summary": "Compute gradients on two workers at once.",
                  "tags": ["asyncio", "data-parallelism"]}
    draft.prompt = "# Tiny workers\n\nCompute every batch's gradient, using both workers.\n"
    draft.guide = VALID_GUIDE
    draft.save()
    return draft


@pytest.fixture
def valid_draft(new_draft) -> ExerciseDraft:
    return fill_valid(new_draft)


def form_data(draft: ExerciseDraft, **overrides) -> dict:
    """The details form as a browser would post it for the draft's current content."""
    from authoring.details_form import GUIDE_SHAPE, META_SHAPE, OPTIONAL

    data = {"base": services.details_hash(draft), "prompt": draft.prompt, "op": "save"}

    def walk(shape, value, name):
        if isinstance(shape, dict):
            for key, sub in shape.items():
                walk(sub, (value or {}).get(key), f"{name}.{key}" if name else key)
        elif isinstance(shape, list):
            for i, item in enumerate(value or []):
                walk(shape[0], item, f"{name}[{i}]")
        elif shape == "tags":
            data[name] = ", ".join(value or [])
        elif not (shape == OPTIONAL and value is None):
            data[name] = "" if value is None else str(value)

    walk(META_SHAPE, draft.meta, "")
    walk(GUIDE_SHAPE, draft.guide, "")
    data.update(overrides)
    return data


class FakeSandbox:
    """Stands in for runner.sandbox.grade: a result per file, and the calls it got."""

    def __init__(self):
        self.calls: list[str] = []
        self.results: dict[str, dict] = {}

    def result(self, verdict: str, failing=(), speedup=1.0, message="graded"):
        return {
            "verdict": verdict,
            "status": "pass" if verdict == "accepted" else "fail",
            "message": message,
            "checks": [{"name": name, "status": "fail", "message": "broken"} for name in failing]
            + [{"name": "clean_shutdown", "status": "pass", "message": "ok"}],
            "metrics": {"speedup": speedup, "target_speedup": 1.8},
            "sandbox": {"backend": "fake"},
        }

    def expect_valid(self):
        """The skeleton's files, each getting what it declares."""
        self.results = {
            "solution.py": self.result("accepted", speedup=2.0),
            "starter.py": self.result("too_slow", speedup=1.0),
            "examples/all_at_once.py": self.result("wrong", ["in_flight", "plausible"], 4.0),
            "examples/one_worker.py": self.result("too_slow", speedup=1.0),
        }
        return self

    def __call__(self, *, slug, files, part):
        self.calls.append(part.file)
        return self.results[part.file]


@pytest.fixture
def fake_sandbox(monkeypatch) -> FakeSandbox:
    from authoring import validation

    fake = FakeSandbox().expect_valid()
    monkeypatch.setattr(validation, "grade_part", fake)
    return fake


def run_validation(validation_id: int, limit: int = 50) -> None:
    """What the Celery worker does: steps until the validation is finished."""
    from authoring.models import Validation

    for _ in range(limit):
        services.validation_step(validation_id=validation_id)
        if not Validation.objects.get(pk=validation_id).is_active:
            return
    raise AssertionError("the validation never finished")


@pytest.fixture
def real_sandbox(settings, monkeypatch):
    """Grade in a real (process) sandbox with the runner's interpreter."""
    if not RUNNER_PYTHON.exists():
        pytest.skip("the runner's interpreter (.venv) is not installed")
    settings.OVERLAP_SANDBOX = os.environ.get("OVERLAP_TEST_SANDBOX", "process")
    settings.OVERLAP_GRADE_SEEDS = 3
    monkeypatch.setenv("OVERLAP_SANDBOX_PYTHON", str(RUNNER_PYTHON))
    monkeypatch.setenv("OVERLAP_SANDBOX_ALLOW_PROCESS", "1")  # the process backend: tests only
    return settings.OVERLAP_SANDBOX
