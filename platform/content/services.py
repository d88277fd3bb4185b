"""content_sync: load the content folder into the database, all or nothing."""

from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from catalog.services import exercise_store
from content.errors import ContentError
from content.folders import read_content
from qa.services import bank_store


@dataclass
class SyncReport:
    lines: list[str] = field(default_factory=list)
    changed: int = 0

    def add(self, kind: str, slug: str, outcome: str) -> None:
        self.lines.append(f"{kind} {slug}: {outcome}")
        if not outcome.startswith(("unchanged", "kept")):
            self.changed += 1


def content_sync(*, root: Path, dry_run: bool = False) -> SyncReport:
    """Validate every file first; write only when all of them are valid, in one transaction."""
    exercises, banks, problems = read_content(root)
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
            outcome = exercise_store(folder=exercise, from_repository=True)
            report.add("exercise", exercise.slug, outcome)
        for bank_file in banks:
            report.add("question bank", bank_file.bank.slug, bank_store(bank_file=bank_file))
    return report
