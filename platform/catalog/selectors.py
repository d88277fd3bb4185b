"""Reads from the catalog."""

from django.db.models import F, QuerySet
from django.shortcuts import get_object_or_404

from catalog.models import Exercise, ExerciseVersion, Tag


def exercise_list(*, tag: str = "", difficulty: str = "") -> QuerySet[Exercise]:
    exercises = Exercise.objects.exclude(current_version=None).prefetch_related("tags")
    if tag:
        exercises = exercises.filter(tags__slug=tag)
    if difficulty:
        exercises = exercises.filter(difficulty=difficulty)
    return exercises.distinct()


def tags_in_use() -> QuerySet[Tag]:
    return Tag.objects.filter(exercises__isnull=False).distinct()


def exercise_version_get(*, slug: str, number: int | None = None) -> ExerciseVersion:
    exercise = get_object_or_404(Exercise, slug=slug)
    if number is None:
        return get_object_or_404(ExerciseVersion, pk=exercise.current_version_id)
    return get_object_or_404(ExerciseVersion, exercise=exercise, number=number)


def repository_newer(*, exercise: Exercise | None = None) -> dict[int, ExerciseVersion]:
    """Exercise id -> the newest version loaded from the repository that is newer than the
    exercise's current one: what `sync_content` stored but did not make current, because
    an author had published the current version in the browser."""
    newer = (
        ExerciseVersion.objects.filter(
            publication__isnull=True,
            number__gt=F("exercise__current_version__number"),
        )
        .order_by("exercise_id", "number")
    )
    if exercise is not None:
        newer = newer.filter(exercise=exercise)
    return {version.exercise_id: version for version in newer}
