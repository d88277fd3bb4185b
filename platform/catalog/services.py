"""Writes to the catalog."""

from typing import TYPE_CHECKING

from catalog.models import Exercise, ExerciseVersion, Tag

if TYPE_CHECKING:
    from content.folders import ExerciseFolder

TAKE_HINT = "manage.py sync_content --take-repository {slug}"


def exercise_store(*, folder: "ExerciseFolder", from_repository: bool = False,
                   take_repository: bool = False) -> str:
    """Store a folder as the exercise's current version when its content changed. Returns
    what happened, as one line for the operator.

    From the browser (publishing) the folder always becomes current. From the repository
    (`sync_content`, every `compose up`) a folder never overrides an author: an exercise
    whose current version was published in the browser keeps it; a repository folder no
    version holds yet is stored as a new version that is *not* current (the history and
    the Authoring list show it), and `take_repository` (the operator's choice,
    `sync_content --take-repository <slug>`) makes the repository's folder current."""
    exercise = Exercise.objects.select_for_update().filter(slug=folder.slug).first()
    if exercise is None:
        _version_create(exercise=None, folder=folder, number=1, current=True)
        return "created (v1)"
    current = exercise.current_version
    latest = exercise.versions.order_by("-number").first()
    if current is not None and current.content_hash == folder.content_hash:
        return "unchanged"
    if not from_repository or take_repository or not _published_in_browser(current):
        if latest is not None and latest.content_hash == folder.content_hash:
            if take_repository and latest != current:
                _make_current(exercise, latest)
                return (f"took the repository's folder: v{latest.number} is current "
                        f"(was v{current.number if current else '?'})")
            if from_repository:
                return "unchanged"
        version = _version_create(exercise=exercise, folder=folder,
                                  number=(latest.number + 1) if latest else 1, current=True)
        if take_repository:
            return (f"took the repository's folder: v{version.number} is current "
                    f"(was v{current.number if current else '?'})")
        return f"new version v{version.number}"
    # The current version was published in the browser: it stays current.
    known = exercise.versions.filter(content_hash=folder.content_hash).order_by("-number").first()
    if known is None:
        known = _version_create(exercise=exercise, folder=folder, number=latest.number + 1,
                                current=False)
        stored = f"stored as v{known.number}, not current"
    elif known.number > current.number:
        stored = f"is v{known.number}, not current"
    else:
        return (f"unchanged (the repository's folder is v{known.number}; "
                f"v{current.number} stays current, published in the browser)")
    return (f"kept v{current.number}, published in the browser; the repository has a newer "
            f"folder ({stored}); to make it current: "
            f"{TAKE_HINT.format(slug=exercise.slug)}")


def _version_create(*, exercise: Exercise | None, folder: "ExerciseFolder", number: int,
                    current: bool) -> ExerciseVersion:
    meta = folder.meta
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
        number=number,
        content_hash=folder.content_hash,
        tags=list(meta.tags),
        prompt=folder.prompt,
        guide=folder.guide.model_dump(mode="json"),
        files=folder.files,
        **fields,
    )
    if current:
        _make_current(exercise, version)
    return version


def _make_current(exercise: Exercise, version: ExerciseVersion) -> None:
    """The exercise's listing fields and tags follow its current version."""
    for name in ("title", "summary", "difficulty", "time_minutes", "track"):
        setattr(exercise, name, getattr(version, name))
    exercise.current_version = version
    exercise.save()
    exercise.tags.set([Tag.objects.get_or_create(slug=slug)[0] for slug in version.tags])


def _published_in_browser(version: ExerciseVersion | None) -> bool:
    from authoring.models import Publication

    return version is not None and Publication.objects.filter(version=version).exists()
