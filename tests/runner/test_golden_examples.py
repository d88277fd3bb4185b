"""Golden tests: every exercise's reference, starter and examples get their verdicts."""

import pytest

from runner.exercise import load
from tests.runner.helpers import SLUGS, failing, graded


def _cases():
    for slug in SLUGS:
        exercise = load(slug)
        yield pytest.param(slug, str(exercise.solution), "accepted", [], id=f"{slug}/solution")
        yield pytest.param(slug, str(exercise.starter), "too_slow", [], id=f"{slug}/starter")
        for example in exercise.examples():
            yield pytest.param(
                slug,
                str(example.path),
                example.verdict,
                list(example.failing),
                id=f"{slug}/{example.name}",
            )


@pytest.mark.parametrize(("slug", "path", "verdict", "failing_checks"), list(_cases()))
def test_file_gets_its_expected_verdict(slug, path, verdict, failing_checks):
    result = graded(slug, path)
    assert (result["verdict"], failing(result)) == (verdict, failing_checks), result["message"]


@pytest.mark.parametrize("slug", SLUGS)
def test_each_exercise_has_a_varied_gallery(slug):
    verdicts = [e.verdict for e in load(slug).examples()]
    assert len(verdicts) >= 6
    assert {"accepted", "wrong", "too_slow", "runtime_error"} <= set(verdicts)


@pytest.mark.parametrize("slug", SLUGS)
def test_reference_beats_target_and_stays_under_the_bound(slug):
    metrics = graded(slug, str(load(slug).solution))["metrics"]
    assert metrics["target_speedup"] <= metrics["speedup"] <= metrics["bound_speedup"]
    assert metrics["seeds"] == 20


@pytest.mark.parametrize("slug", SLUGS)
def test_starter_is_the_baseline(slug):
    metrics = graded(slug, str(load(slug).starter))["metrics"]
    assert metrics["candidate_time"] == metrics["baseline_time"]
    assert metrics["speedup"] == 1.0
