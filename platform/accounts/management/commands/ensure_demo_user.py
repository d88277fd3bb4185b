import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from accounts.roles import ALL_GROUPS

USERNAME = "interviewer"
PASSWORD = "overlap-demo"
PASSWORD_LENGTH = 16  # characters, url-safe base64: 96 bits


def password_from_file(path: Path) -> str:
    """The demo password kept in `path` (0600), generated there once: the file holds
    exactly the password and a newline, so `cat var/demo_password` shows what to type.
    A file written by an older version held a longer token whose first 16 characters
    were the password: it is rewritten to hold only those (the password stays)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        kept = path.read_text().strip()
        if kept and len(kept) <= PASSWORD_LENGTH:
            return kept
        password = kept[:PASSWORD_LENGTH] or secrets.token_urlsafe(12)
        rewritten = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(rewritten, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(password + "\n")
        os.replace(rewritten, path)
        return password
    password = secrets.token_urlsafe(12)
    with os.fdopen(fd, "w") as handle:
        handle.write(password + "\n")
    return password


class Command(BaseCommand):
    help = ("Create (or reset) the local demo interviewer and print its login. With DEBUG on "
            "its password is the well-known demo one; with DEBUG off (`make run`) it is random, "
            "generated once into OVERLAP_DEMO_PASSWORD_FILE (0600).")

    def handle(self, *args, **options):
        password_file = os.environ.get("OVERLAP_DEMO_PASSWORD_FILE")
        if settings.DEBUG:
            password = PASSWORD
        elif password_file:
            password = password_from_file(Path(password_file))
        else:
            raise CommandError("The demo user is for local use only: DEBUG is off and no "
                               "OVERLAP_DEMO_PASSWORD_FILE is set.")
        user, _ = User.objects.get_or_create(
            username=USERNAME, defaults={"first_name": "Demo", "last_name": "Interviewer"}
        )
        user.set_password(password)
        user.is_staff = True
        user.save()
        user.groups.add(*Group.objects.filter(name__in=ALL_GROUPS))
        self.stdout.write(
            self.style.SUCCESS(f"Demo interviewer: username {USERNAME!r}, password {password!r}")
        )
