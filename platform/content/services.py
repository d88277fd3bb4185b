"""content_sync: load the content folder into the database, all or nothing."""

from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from catalog.services import exercise_store
from content.errors import ContentError, Problem
from content.folders import read_content
from qa.services import bank_store


@dataclass
class SyncReport:
    lines: list[str] = field(default_factory=list)
    changed: int = 0
    # Exercises whose repository folder is newer than an author's current version.
    kept: list[str] = field(default_factory=list)

    def add(self, kind: str, slug: str, outcome: str) -> None:
        self.lines.append(f"{kind} {slug}: {outcome}")
        if outcome.startswith("kept"):
            self.kept.append(slug)
        elif not outcome.startswith("unchanged"):
            self.changed += 1


def content_sync(*, root: Path, dry_run: bool = False,
                 take_repository: frozenset[str] | set[str] = frozenset()) -> SyncReport:
    """Validate every file first; write only when all of them are valid, in one transaction.

    The repository only adds: an exercise whose current version an author published in
    the browser keeps it unless its slug is in `take_repository` (see exercise_store)."""
    exercises, banks, problems = read_content(root)
    in_repository = {exercise.slug for exercise in exercises}
    problems = list(problems) + [
        Problem(slug, "", f"--take-repository: no exercise folder {slug!r} in {root}")
        for slug in sorted(set(take_repository) - in_repository)
    ]
    if problems:
        raise ContentError(problems)
    report = SyncReport()
    if dry_run:
        for exercise in exercises:
            report.add("exercise", exercise.slug, "valid")
        for bank_file in banks:
            report.add("question bank", bank_file.bank.slug, "valid")
        return report
    with transaction.atomic():
        for exercise in exercises:
            outcome = exercise_store(folder=exercise, from_repository=True,
                                     take_repository=exercise.slug in take_repository)
            report.add("exercise", exercise.slug, outcome)
        for bank_file in banks:
            report.add("question bank", bank_file.bank.slug, bank_store(bank_file=bank_file))
    return report
