from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from content.errors import ContentError
from content.services import content_sync


class Command(BaseCommand):
    help = ("Load exercises/ and the question banks into the database (idempotent). The "
            "repository only adds: an exercise an author published in the browser keeps "
            "that version unless --take-repository names it.")

    def add_arguments(self, parser):
        parser.add_argument("--dir", type=Path, default=None, help="content folder")
        parser.add_argument(
            "--check", action="store_true", help="validate only; write nothing"
        )
        parser.add_argument(
            "--take-repository", action="append", default=[], metavar="SLUG",
            help="make the repository's folder of this exercise its current version, over "
                 "a version published in the browser (repeat for several exercises)",
        )

    def handle(self, *args, dir=None, check=False, take_repository=(), **options):
        root = (dir or settings.EXERCISES_DIR).resolve()
        try:
            report = content_sync(root=root, dry_run=check,
                                  take_repository=frozenset(take_repository))
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
        if report.kept:
            self.stdout.write(self.style.WARNING(
                f"The repository has a newer folder for {len(report.kept)} exercise(s) "
                f"whose current version was published in the browser: "
                f"{', '.join(report.kept)}. They were kept; to use the repository's, run "
                "sync_content --take-repository <slug>."))
