import asyncio
import json
import socket

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.test import Client

from catalog.models import Exercise
from interviews import services
from ops.stack import Stack, wait_for_port
from realtime import bench
from runner import units

PORTS = range(8100, 8200)  # this project's range for servers a benchmark starts


def _free_port(exclude=()) -> int:
    for port in PORTS:
        if port in exclude:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 8100-8199")


class Command(BaseCommand):
    help = ("Benchmark keystroke -> visible on the other side of the live pad through the "
            "real stack (uvicorn, Channels, Redis channel layer), N sessions typing at once.")

    def add_arguments(self, parser):
        parser.add_argument("--exercise", default="async-parameter-server")
        parser.add_argument("--sessions", type=int, default=10)
        parser.add_argument("--rate", type=float, default=5.0, help="characters per second")
        parser.add_argument("--seconds", type=float, default=30.0)
        parser.add_argument("--url", default="", help="an already running server")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, exercise, sessions, rate, seconds, url, json, **options):
        measured = units.measure()  # machine-speed units, in the same run
        call_command("sync_content", verbosity=0)
        user, _ = User.objects.get_or_create(username="bench-pad-interviewer")
        user.groups.add(Group.objects.get(name="interviewers"))
        client = Client()
        client.force_login(user)  # a real session row: the server reads the same database
        name = settings.SESSION_COOKIE_NAME
        cookie = f"{name}={client.cookies[name].value}"
        target = Exercise.objects.get(slug=exercise)
        live = []
        for _ in range(sessions):
            session = services.session_create(interviewer=user, exercise=target,
                                              candidate_name="Bench candidate",
                                              candidate_email="bench@example.org")
            services.session_start(session=session)
            live.append((session.token, session.pk))

        stack = None
        if not url:
            port = _free_port()
            stack = Stack(settings.ROOT, settings.VAR_DIR, port, _free_port({port}),
                          log=lambda line: self.stderr.write(f"[bench] {line}"))
            stack.start_redis()
            stack.start_web()
            if not wait_for_port(port, timeout=30):
                stack.stop()
                raise RuntimeError("the ASGI server did not start")
            url = f"http://127.0.0.1:{port}"
        try:
            result = asyncio.run(bench.run(url.replace("http", "ws", 1), url, live, cookie,
                                           rate, seconds))
        finally:
            if stack is not None:
                stack.stop()
        if json:
            self.stdout.write(json_dumps(bench.summary(result)))
            return
        self.stdout.write(bench.report(
            f"Live pad: keystroke -> visible on the other side ({sessions} sessions typing at "
            f"{rate:g} chars/s for {seconds:g} s; uvicorn + Channels + Redis)",
            [result.row("keystroke -> interviewer's socket", measured)]))
        self.stdout.write(units.describe(measured))
        for error in result.errors[:5]:
            self.stderr.write(f"error: {error}")


def json_dumps(data) -> str:
    return json.dumps(data, indent=2)
