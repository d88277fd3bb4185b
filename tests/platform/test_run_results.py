"""A grading result is checked against the runner's contract before it is stored."""

import pytest

from runner.contract import LABELS, Verdict, make_result
from runs import services
from runs.models import Run

pytestmark = pytest.mark.django_db


def _grade_returning(monkeypatch, result: dict) -> None:
    from runner import sandbox

    monkeypatch.setattr(sandbox, "grade", lambda *args, **kwargs: result)


def _run(live_session) -> Run:
    return Run.objects.create(
        session=live_session,
        exercise_version=live_session.exercise_version,
        code="x = 1\n",
        requested_by="candidate",
    )


def test_a_malformed_result_is_an_internal_error_and_every_page_still_renders(
    client, live_session, monkeypatch
):
    broken = make_result(exercise="x", verdict="accepted", message="fine")
    broken["trace"]["candidate"] = {"lanes": ["w"], "spans": [{"lane": "w", "start": "soon"}]}
    _grade_returning(monkeypatch, broken)
    run = _run(live_session)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.INTERNAL_ERROR
    assert run.verdict == "internal_error"
    response = client.get(f"/c/{live_session.token}/runs/{run.pk}/")
    assert response.status_code == 200
    assert "not your code" in response.content.decode() or "Internal" in response.content.decode()


def test_a_valid_result_is_stored_as_the_contract_shapes_it(live_session, monkeypatch):
    result = make_result(exercise="x", verdict="too_slow", message="slow")
    result["stdout"] = "y" * 200_000  # bounded on the way in
    _grade_returning(monkeypatch, result)
    run = _run(live_session)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.DONE and run.verdict == "too_slow"
    assert len(run.result["stdout"]) < 70_000


def test_every_verdict_has_a_human_label():
    assert set(LABELS) == set(Verdict)
    assert all(label and "_" not in label for label in LABELS.values())


def test_output_postgres_cannot_store_is_kept_readable_and_the_run_is_saved(
    client, live_session, monkeypatch
):
    """A candidate's program may print a NUL or a lone surrogate (bytes decoded by hand, a
    bad slice of an emoji): the run still gets its verdict, with those characters shown
    as U+FFFD, instead of a database error that leaves it without one."""
    odd = "loss\x00 \ud83d end"
    result = make_result(exercise="x", verdict="wrong", message=f"ValueError: {odd}",
                         stdout=odd, stderr=odd)
    result["error"] = {"type": "exception", "line": 3, "traceback": odd}
    _grade_returning(monkeypatch, result)
    run = _run(live_session)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.DONE and run.verdict == "wrong"
    shown = "loss\ufffd \ufffd end"
    assert run.result["stdout"] == run.result["stderr"] == shown
    assert run.result["error"]["traceback"] == shown
    assert run.result["message"] == f"ValueError: {shown}"
    assert client.get(f"/c/{live_session.token}/runs/{run.pk}/").status_code == 200


def test_a_gpu_result_shows_the_no_overlap_speedup_beside_the_target(
    client, live_session, monkeypatch
):
    result = make_result(exercise="x", verdict="too_slow", message="slow")
    result["metrics"].update(speedup=1.42, target_speedup=1.71, bound_speedup=2.1,
                             zero_speedup=1.38, serial_time=0.36)  # fmt: skip
    _grade_returning(monkeypatch, result)
    run = _run(live_session)
    services.run_execute(run_id=run.pk)
    page = client.get(f"/c/{live_session.token}/runs/{run.pk}/").content.decode()
    assert "1.42\u00d7 speedup" in page
    assert "(target 1.71\u00d7, no overlap 1.38\u00d7, best possible 2.10\u00d7)" in page
