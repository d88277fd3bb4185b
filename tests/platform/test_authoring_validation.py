"""Validation: what `runner validate` checks, file by file in the sandbox, through Celery."""

from datetime import timedelta

import pytest
from django.utils import timezone

from authoring import services
from authoring.models import Validation, ValidationPart
from authoring.validation import PartPlan, judge

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db


def _parts(validation) -> list[tuple]:
    return [(p.file, p.status, p.verdict, p.ok) for p in validation.parts.all()]


def test_validate_queues_after_commit_and_shows_progress(author_client, valid_draft,
                                                         django_capture_on_commit_callbacks,
                                                         monkeypatch):
    queued = []
    monkeypatch.setattr(services, "validation_enqueue",
                        lambda *, validation, now=None: queued.append(validation.pk))
    with django_capture_on_commit_callbacks(execute=True):
        response = author_client.post(f"/authoring/exercises/{valid_draft.slug}/validate/",
                                      HTTP_HX_REQUEST="true")
    validation = Validation.objects.get()
    assert queued == [validation.pk]
    html = response.content.decode()
    assert "Queued…" in html
    assert f'hx-get="/authoring/exercises/{valid_draft.slug}/validations/{validation.pk}/"' in html
    # Solution, starter, then the examples in name order: what runner validate grades.
    assert [p.file for p in validation.parts.all()] == [
        "solution.py", "starter.py", "examples/all_at_once.py", "examples/one_worker.py"]
    assert validation.parts.get(file="examples/all_at_once.py").expected_failing == [
        "in_flight", "plausible"]


def test_each_step_grades_one_file_and_the_panel_shows_it(author_client, author, valid_draft,
                                                          fake_sandbox):
    validation = services.validation_request(draft=valid_draft, user=author)
    services.validation_step(validation_id=validation.pk)
    assert fake_sandbox.calls == ["solution.py"]
    assert _parts(validation)[:2] == [("solution.py", "done", "accepted", True),
                                      ("starter.py", "pending", "", None)]
    html = author_client.get(
        f"/authoring/exercises/{valid_draft.slug}/validations/{validation.pk}/").content.decode()
    assert "Running…" in html and "2.00\N{MULTIPLICATION SIGN}" in html and "waiting" in html
    assert 'hx-trigger="every 1s"' in html


def test_a_passing_validation_allows_publishing(author_client, author, valid_draft,
                                                fake_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    validation.refresh_from_db()
    assert (validation.status, validation.passed) == ("done", True)
    assert fake_sandbox.calls == ["solution.py", "starter.py", "examples/all_at_once.py",
                                  "examples/one_worker.py"]
    html = author_client.get(
        f"/authoring/exercises/{valid_draft.slug}/validations/{validation.pk}/").content.decode()
    assert "Passed" in html and "All 4 files got their expected verdicts." in html
    assert "hx-trigger" not in html  # polling stops
    assert '<button type="submit" id="publish-button" >' in html


def test_an_example_with_the_wrong_verdict_fails_the_validation_and_names_it(author, valid_draft,
                                                                             fake_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    fake_sandbox.results["examples/all_at_once.py"] = fake_sandbox.result("wrong", ["in_flight"])
    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    validation.refresh_from_db()
    assert validation.passed is False
    part = validation.parts.get(file="examples/all_at_once.py")
    assert part.ok is False
    assert part.problem.startswith(
        "expected wrong [in_flight, plausible], got wrong [in_flight]")
    assert "examples/all_at_once.py" in validation.message


def test_a_reference_that_fails_its_own_checks_is_named(author, valid_draft, fake_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    fake_sandbox.results["solution.py"] = fake_sandbox.result(
        "wrong", ["gradients"], message="1 of 5 checks failed: gradients.")
    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    part = validation.parts.get(file="solution.py")
    assert part.problem == ("the reference solution must be accepted: 1 of 5 checks failed: "
                            "gradients.")


def test_a_grader_that_does_not_import_stops_the_validation_clearly(author, valid_draft,
                                                                    fake_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    fake_sandbox.results["solution.py"] = fake_sandbox.result(
        "internal_error", message="internal error: ModuleNotFoundError(\"No module named "
                                  "'runner.sim.ring'\")")
    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    validation.refresh_from_db()
    assert fake_sandbox.calls == ["solution.py"]  # nothing more is graded
    part = validation.parts.get(file="solution.py")
    assert "check grader.py (does it import?)" in part.problem
    assert "No module named 'runner.sim.ring'" in part.problem
    assert validation.parts.filter(status="skipped").count() == 3
    assert validation.passed is False and "not graded" in validation.message


def test_static_problems_refuse_the_validation_before_any_sandbox(author_client, valid_draft,
                                                                  fake_sandbox):
    valid_draft.files = {**valid_draft.files, "grader.py": "import runner\nEXERCISE = (\n"}
    valid_draft.save()
    html = author_client.post(f"/authoring/exercises/{valid_draft.slug}/validate/",
                              HTTP_HX_REQUEST="true").content.decode()
    assert "The code cannot be validated yet" in html
    assert "grader.py: line 2: syntax error" in html
    assert not Validation.objects.exists() and fake_sandbox.calls == []


def test_only_one_validation_at_a_time(author, valid_draft):
    services.validation_request(draft=valid_draft, user=author)
    with pytest.raises(services.Refused, match="already running"):
        services.validation_request(draft=valid_draft, user=author)


def test_a_redelivered_step_never_grades_a_file_twice(author, valid_draft, fake_sandbox):
    validation = services.validation_request(draft=valid_draft, user=author)
    Validation.objects.filter(pk=validation.pk).update(status=Validation.RUNNING)
    ValidationPart.objects.filter(validation=validation, position=0).update(
        status=ValidationPart.RUNNING, started_at=timezone.now(), attempts=1)
    ValidationPart.objects.filter(validation=validation, position__gt=0).update(
        status=ValidationPart.DONE, ok=True)
    services.validation_step(validation_id=validation.pk)
    assert fake_sandbox.calls == []
    assert validation.parts.get(position=0).status == ValidationPart.RUNNING


def test_a_validation_is_never_finished_while_a_file_is_still_grading(author, valid_draft,
                                                                      fake_sandbox):
    """A retried step still grades the first file when another step grades the last one:
    the validation says Running (not Passed or Failed) until that file is done too."""
    validation = services.validation_request(draft=valid_draft, user=author)
    Validation.objects.filter(pk=validation.pk).update(status=Validation.RUNNING)
    last = validation.parts.order_by("-position").first().position
    ValidationPart.objects.filter(validation=validation, position=0).update(
        status=ValidationPart.RUNNING, started_at=timezone.now(), attempts=1)
    ValidationPart.objects.filter(validation=validation, position__gt=0,
                                  position__lt=last).update(status=ValidationPart.DONE, ok=True)
    services.validation_step(validation_id=validation.pk)  # grades the last file
    validation.refresh_from_db()
    assert validation.status == Validation.RUNNING and validation.passed is None
    ValidationPart.objects.filter(validation=validation, position=0).update(
        status=ValidationPart.PENDING)
    services.validation_step(validation_id=validation.pk)  # the first file, at last
    validation.refresh_from_db()
    assert validation.status == Validation.DONE and validation.passed is True


def test_no_sandbox_is_an_internal_error_not_a_verdict(author, valid_draft, monkeypatch):
    from authoring import validation as checks

    def unavailable(**kwargs):
        raise checks.SandboxMissing("no isolating sandbox is available")

    monkeypatch.setattr(checks, "grade_part", unavailable)
    validation = services.validation_request(draft=valid_draft, user=author)
    services.validation_step(validation_id=validation.pk)
    validation.refresh_from_db()
    assert validation.status == Validation.INTERNAL_ERROR
    assert "no isolating sandbox" in validation.error
    assert "says nothing about the exercise" in validation.message


def _old(minutes=10):
    return timezone.now() - timedelta(minutes=minutes)


def test_a_lost_step_message_is_queued_again(author, valid_draft, monkeypatch):
    queued = []
    monkeypatch.setattr(services, "validation_enqueue",
                        lambda *, validation, now=None: queued.append(validation.pk))
    validation = services.validation_request(draft=valid_draft, user=author)
    Validation.objects.filter(pk=validation.pk).update(created_at=_old(),
                                                       last_enqueued_at=_old())
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("authoring")  # the message lost
    assert services.validations_recover(validation_ids=[validation.pk])["requeued"] == 1
    assert queued == [validation.pk]
    # Once per staleness window, however often recovery runs.
    assert services.validations_recover(validation_ids=[validation.pk])["requeued"] == 0
    assert queued == [validation.pk]


def test_a_file_whose_worker_died_is_retried_then_failed_clearly(author_client, author,
                                                                 valid_draft, monkeypatch):
    monkeypatch.setattr(services, "validation_enqueue", lambda *, validation, now=None: None)
    validation = services.validation_request(draft=valid_draft, user=author)
    Validation.objects.filter(pk=validation.pk).update(status=Validation.RUNNING)
    part = validation.parts.get(position=0)
    ValidationPart.objects.filter(pk=part.pk).update(status="running", attempts=1,
                                                     started_at=_old())
    assert services.validations_recover(validation_ids=[validation.pk])["retried"] == 1
    assert validation.parts.get(position=0).status == "pending"

    ValidationPart.objects.filter(pk=part.pk).update(status="running", attempts=2,
                                                     started_at=_old())
    # Polling never recovers (a GET is a read); Celery beat's task does.
    author_client.get(f"/authoring/exercises/{valid_draft.slug}/validations/{validation.pk}/")
    assert validation.parts.get(position=0).status == "running"
    from overlap.celery import recover

    assert recover.apply().get()["validations"]["failed"] == 1
    html = author_client.get(
        f"/authoring/exercises/{valid_draft.slug}/validations/{validation.pk}/").content.decode()
    validation.refresh_from_db()
    assert validation.status == Validation.INTERNAL_ERROR
    assert "stopped before finishing" in validation.parts.get(position=0).problem
    assert "Internal error" in html


def test_judge_applies_the_runner_validate_rules():
    ok = {"verdict": "too_slow", "checks": [], "metrics": {"speedup": 1.0}}
    assert judge(PartPlan("starter.py", "too_slow"), ok).ok
    wrong_starter = {"verdict": "wrong", "message": "m",
                     "checks": [{"name": "final_weights", "status": "fail"}], "metrics": {}}
    outcome = judge(PartPlan("starter.py", "too_slow"), wrong_starter)
    assert not outcome.ok and outcome.problem == "the starter must be correct but too_slow: m"
    # Failing checks are compared as a sorted set of names; warnings never count.
    example = {"verdict": "wrong", "message": "m", "metrics": {"speedup": 2.5},
               "checks": [{"name": "b", "status": "fail"}, {"name": "a", "status": "fail"},
                          {"name": "threads", "status": "warn"}]}
    assert judge(PartPlan("examples/x.py", "wrong", ("a", "b")), example).ok
    assert not judge(PartPlan("examples/x.py", "wrong", ("a",)), example).ok


def test_example_expectations_are_read_with_the_runners_own_parser(valid_draft):
    from authoring.validation import plan

    valid_draft.files = {**valid_draft.files, "examples/late.py":
                         '"""Stops late.\n\nexpect: wrong\nfailing: z_check, a_check\n"""\n'}
    problems, parts = plan(valid_draft.slug, valid_draft.files)
    assert problems == []
    late = next(p for p in parts if p.file == "examples/late.py")
    assert (late.expected, late.expected_failing) == ("wrong", ("a_check", "z_check"))


@pytest.mark.slow
def test_a_real_sandbox_validates_the_skeleton_exercise(author, valid_draft, real_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    validation.refresh_from_db()
    rows = [(p.file, p.verdict, p.ok, p.backend) for p in validation.parts.all()]
    assert rows == [
        ("solution.py", "accepted", True, real_sandbox),
        ("starter.py", "too_slow", True, real_sandbox),
        ("examples/all_at_once.py", "wrong", True, real_sandbox),
        ("examples/one_worker.py", "too_slow", True, real_sandbox),
    ], [p.problem for p in validation.parts.all()]
    assert validation.parts.get(file="solution.py").speedup == 2.0
    assert validation.passed is True


@pytest.mark.slow
def test_a_real_sandbox_names_a_grader_that_does_not_import(author, valid_draft, real_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    valid_draft.files = {**valid_draft.files,
                         "grader.py": "from runner.sim import RingLink\n"}
    valid_draft.save()
    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    part = validation.parts.get(file="solution.py")
    assert part.verdict == "internal_error"
    assert "check grader.py (does it import?)" in part.problem and "RingLink" in part.problem


def test_validations_have_their_own_queue_so_they_never_delay_a_candidates_run(author,
                                                                              valid_draft):
    validation = services.validation_request(draft=valid_draft, user=author)
    assert validation.queue == "authoring"
