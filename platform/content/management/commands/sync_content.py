from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from content.errors import ContentError
from content.services import content_sync


class Command(BaseCommand):
    help = "Load exercises/ and the question banks into the database (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--dir", type=Path, default=None, help="content folder")
        parser.add_argument(
            "--check", action="store_true", help="validate only; write nothing"
        )

    def handle(self, *args, dir=None, check=False, **options):
        root = (dir or settings.EXERCISES_DIR).resolve()
        try:
            report = content_sync(root=root, dry_run=check)
        except ContentError as exc:
            for problem in exc.problems:
                self.stderr.write(f"  {problem}")
            raise CommandError(
                f"{len(exc.problems)} problem(s) in {root}; nothing was loaded."
            ) from None
        for line in report.lines:
            self.stdout.write(f"  {line}")
        verb = "checked" if check else f"{report.changed} changed"
        self.stdout.write(self.style.SUCCESS(f"Content {verb}."))
