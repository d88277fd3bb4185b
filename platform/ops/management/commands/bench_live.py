import os
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from catalog.models import Exercise
from ops import bench_live
from ops.bench_setup import STAFF, free_port, live_session, staff_user
from ops.stack import Stack, wait_for_port
from runner import units
from runs.models import Run


class Command(BaseCommand):
    help = "Benchmark click-to-verdict and keystroke-to-interviewer latency on a real stack."

    def add_arguments(self, parser):
        parser.add_argument("--exercise", default="async-parameter-server")
        parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16],
                            help="live sessions clicking Run at once")
        parser.add_argument("--workers", type=int, nargs="+", default=[1],
                            help="Celery worker processes (each concurrency 2, own pool)")
        parser.add_argument("--runs", type=int, default=5, help="runs per session")
        parser.add_argument("--keystrokes", type=int, default=20)
        parser.add_argument("--no-push", dest="push", action="store_false",
                            help="no pad socket: poll the run every 100 ms instead")

    def handle(self, *args, exercise, concurrency, workers, runs, keystrokes, push,
               **options):
        measured = units.measure()  # machine-speed units, in the same run
        call_command("sync_content", verbosity=0)
        user = staff_user()
        target = Exercise.objects.get(slug=exercise)
        code = target.current_version.files["solution.py"]

        os.environ.setdefault("OVERLAP_SANDBOX_POOL_SIZE", "2")
        samples = {}
        started = timezone.now()
        for count in workers:
            samples.update(self._measure(user, target, code, concurrency, runs, count,
                                         keystrokes if count == workers[0] else 0, push))
        backend = os.environ.get("OVERLAP_SANDBOX", settings.OVERLAP_SANDBOX)
        # What ran the runs, not only what was asked: "auto" takes bwrap when the docker
        # image is stale, and the figures are then another backend's.
        used = Run.objects.filter(created_at__gte=started).values_list(
            "result__sandbox__backend", flat=True)
        backend += f" (ran on {', '.join(sorted({b for b in used if b})) or 'none'})"
        database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        self.stdout.write(bench_live.report(
            f"Live interview latency ({exercise}, sandbox {backend}, {database}, "
            f"DEBUG {'on' if settings.DEBUG else 'off'}, {os.cpu_count()} CPUs, "
            f"{sys.platform})",
            [s.row(label, measured) for label, s in samples.items()]))
        self.stdout.write(units.describe(measured))
        for label, s in samples.items():
            for error in s.errors[:3]:
                self.stderr.write(f"{label}: {error}")

    def _measure(self, user, target, code, concurrency, runs, workers, keystrokes, push):
        port, redis_port = free_port(), free_port()
        stack = Stack(settings.ROOT, settings.VAR_DIR, port, redis_port,
                      log=lambda line: self.stderr.write(f"[bench] {line}"), workers=workers)
        samples = {}
        try:
            stack.start()
            wait_for_port(port, timeout=30)
            base = f"http://127.0.0.1:{port}"
            for n in concurrency:
                sessions = [live_session(user, target) for _ in range(n)]
                tokens = [s.token for s in sessions]
                # Warm-up: one run per session, not measured (first sandboxes, first imports).
                bench_live.clicks_concurrently(base, tokens, code, 1, push)
                started = time.perf_counter()
                got = bench_live.clicks_concurrently(base, tokens, code, runs, push)
                elapsed = time.perf_counter() - started
                how = "pushed" if push else "polled every 100 ms"
                label = (f"click-to-verdict ({how}), {n} session(s), {workers} worker(s); "
                         f"{len(got.values) / elapsed * 60:.1f} verdicts/min")
                samples[label] = got
            if keystrokes:
                live = bench_live.Samples()
                session = live_session(user, target)
                bench_live.keystroke_to_view(base, session.token, session.pk, STAFF,
                                             keystrokes, live)
                samples["keystroke-to-interviewer-view (console polls every 1 s)"] = live
        finally:
            stack.stop()
        return samples
