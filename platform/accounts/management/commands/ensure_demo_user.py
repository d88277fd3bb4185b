from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from accounts.roles import ALL_GROUPS

USERNAME = "interviewer"
PASSWORD = "overlap-demo"


class Command(BaseCommand):
    help = "Create (or reset) the local demo interviewer and print its login. DEBUG only."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("The demo user is for local development only (DEBUG is off).")
        user, _ = User.objects.get_or_create(
            username=USERNAME, defaults={"first_name": "Demo", "last_name": "Interviewer"}
        )
        user.set_password(PASSWORD)
        user.is_staff = True
        user.save()
        user.groups.add(*Group.objects.filter(name__in=ALL_GROUPS))
        self.stdout.write(
            self.style.SUCCESS(f"Demo interviewer: username {USERNAME!r}, password {PASSWORD!r}")
        )
