"""Writes to the catalog."""

from typing import TYPE_CHECKING

from catalog.models import Exercise, ExerciseVersion, Tag

if TYPE_CHECKING:
    from content.folders import ExerciseFolder


def exercise_store(*, folder: "ExerciseFolder", from_repository: bool = False) -> str:
    """Store a folder as a new version when its content changed. Returns what happened.

    From the repository (`sync_content`, every `compose up`), a folder never overrides an
    author: content some version already has is not stored again, and an exercise whose
    current version was published in the browser keeps it (the report says the
    repository's folder differs; an operator who wants it imports it in Authoring)."""
    meta = folder.meta
    exercise = Exercise.objects.select_for_update().filter(slug=folder.slug).first()
    latest = exercise.versions.order_by("-number").first() if exercise else None
    if latest is not None and latest.content_hash == folder.content_hash:
        return "unchanged"
    if exercise is not None and from_repository:
        current = exercise.current_version
        known = exercise.versions.filter(content_hash=folder.content_hash).first()
        browser = current is not None and _published_in_browser(current)
        if known is not None:
            return (f"unchanged (the repository's folder is v{known.number}; "
                    f"v{current.number if current else '?'} stays current)")
        if browser:
            return (f"kept v{current.number}, published in the browser; the repository's "
                    "folder differs and was not loaded (to use it, import the folder in "
                    "Authoring, validate and publish it)")
    fields = {
        "title": meta.title,
        "summary": meta.summary,
        "difficulty": meta.difficulty,
        "time_minutes": meta.time_minutes,
        "track": meta.track,
    }
    if exercise is None:
        exercise = Exercise.objects.create(slug=folder.slug, **fields)
    version = ExerciseVersion.objects.create(
        exercise=exercise,
        number=(latest.number + 1) if latest else 1,
        content_hash=folder.content_hash,
        tags=list(meta.tags),
        prompt=folder.prompt,
        guide=folder.guide.model_dump(mode="json"),
        files=folder.files,
        **fields,
    )
    for name, value in fields.items():
        setattr(exercise, name, value)
    exercise.current_version = version
    exercise.save()
    exercise.tags.set([Tag.objects.get_or_create(slug=slug)[0] for slug in meta.tags])
    return f"new version v{version.number}" if latest else "created (v1)"


def _published_in_browser(version: ExerciseVersion) -> bool:
    from authoring.models import Publication

    return Publication.objects.filter(version=version).exists()
