import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from accounts.roles import ALL_GROUPS

USERNAME = "interviewer"
PASSWORD = "overlap-demo"


class Command(BaseCommand):
    help = ("Create (or reset) the local demo interviewer and print its login. With DEBUG on "
            "its password is the well-known demo one; with DEBUG off (`make run`) it is random, "
            "generated once into OVERLAP_DEMO_PASSWORD_FILE (0600).")

    def handle(self, *args, **options):
        password_file = os.environ.get("OVERLAP_DEMO_PASSWORD_FILE")
        if settings.DEBUG:
            password = PASSWORD
        elif password_file:
            from overlap.settings import secret_key_from_file

            password = secret_key_from_file(Path(password_file))[:16]
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
