import dataclasses
import os
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from catalog.models import Exercise
from ops import bench_capacity, bench_live
from ops.bench_live import Browser
from ops.bench_setup import STAFF, free_port, live_session, staff_user
from ops.stack import Stack, wait_for_port
from runner import units
from runs.models import Run

STEPS = [1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32]
QUICK = {"steps": [1, 2], "seconds": 25.0, "between": [8.0, 12.0], "min_runs": 0}


def _mean_units(before: dict, after: dict) -> dict:
    """The units measured before and after the steps, averaged (the machine drifts)."""
    both = [u for u in (before, after) if u]
    return {k: sum(u[k] for u in both) / len(both) for k in both[0]} if both else {}


class Command(BaseCommand):
    help = ("Find how many live interviews this machine serves: N sessions typing and "
            "clicking Run at an interview's pace through the real stack, N stepped up until "
            "click -> verdict p95 exceeds the bar, a correct run gets a verdict other than "
            "accepted (a timeout) or a click gets none.")

    def add_arguments(self, parser):
        parser.add_argument("--exercise", default="async-parameter-server",
                            help="its reference solution (solution.py) is what is run")
        parser.add_argument("--steps", type=int, nargs="+", default=STEPS,
                            help="session counts to try, in order; stops at the first failing")
        parser.add_argument("--seconds", type=float, default=90.0,
                            help="how long each step plays (no click starts after)")
        parser.add_argument("--min-runs", type=int, default=12,
                            help="a step with few sessions plays longer, to expect this many "
                                 "runs (p95 of fewer is their maximum)")
        parser.add_argument("--rate", type=float, default=3.0,
                            help="characters each candidate types a second")
        parser.add_argument("--between", type=float, nargs=2, default=[20.0, 40.0],
                            metavar=("MIN", "MAX"), help="seconds between two clicks on Run")
        parser.add_argument("--bar", type=float, default=2.0,
                            help="click -> verdict p95 a step must stay within (s)")
        parser.add_argument("--seed", type=int, default=24)
        parser.add_argument("--concurrency", type=int, default=2,
                            help="gradings the worker runs at once")
        parser.add_argument("--quick", action="store_true",
                            help=f"smoke test: steps {QUICK['steps']}, {QUICK['seconds']:g} s "
                                 f"each, Run every {QUICK['between'][0]:g}-"
                                 f"{QUICK['between'][1]:g} s")

    def handle(self, *args, exercise, steps, seconds, min_runs, rate, between, bar, seed,
               concurrency, quick, **options):
        if quick:
            steps, seconds, between = QUICK["steps"], QUICK["seconds"], QUICK["between"]
            min_runs = QUICK["min_runs"]
        self.min_runs = min_runs
        before = units.measure()  # machine-speed units, in the same run (and after it)
        call_command("sync_content", verbosity=0)
        user = staff_user()
        target = Exercise.objects.get(slug=exercise)
        code = target.current_version.files["solution.py"].rstrip("\n") + "\n"
        pace = bench_capacity.Pace(seconds=seconds, rate=rate, between=tuple(between),
                                   seed=seed)
        os.environ.setdefault("OVERLAP_SANDBOX_POOL_SIZE", "2")
        port = free_port()
        stack = Stack(settings.ROOT, settings.VAR_DIR, port, free_port(),
                      log=lambda line: self.stderr.write(f"[bench] {line}"),
                      concurrency=concurrency)
        started = self.started = timezone.now()
        try:
            stack.start()
            if not wait_for_port(port, timeout=60):
                raise RuntimeError("the web server did not start")
            base = f"http://127.0.0.1:{port}"
            staff = Browser(base)
            staff.log_in(*STAFF)
            # Warm-up, not measured: the first sandboxes, the first imports.
            warm = [live_session(user, target).token for _ in range(concurrency)]
            bench_live.clicks_concurrently(base, warm, code, 1)
            best, played = bench_capacity.search(
                steps, lambda n: self._step(base, user, target, code, staff, pace, n), bar,
                log=lambda line: self.stderr.write(f"[bench] {line}"))
        finally:
            stack.stop()
        after = units.measure()
        measured = _mean_units(before, after)

        backend = os.environ.get("OVERLAP_SANDBOX", settings.OVERLAP_SANDBOX)
        used = Run.objects.filter(created_at__gte=started).values_list(
            "result__sandbox__backend", flat=True)
        backend += f" (ran on {', '.join(sorted({b for b in used if b})) or 'none'})"
        database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        self.stdout.write(
            f"\n### Capacity: live interviews served with click -> verdict p95 <= {bar:g} s "
            f"and no timeout ({exercise} reference solution; sandbox {backend}, {database}, "
            f"one worker x {concurrency}, {os.cpu_count()} CPUs, {sys.platform}; each step "
            f"{seconds:g} s or long enough for {min_runs} runs, {rate:g} chars/s, Run every "
            f"{between[0]:g}-{between[1]:g} s)\n")
        self.stdout.write(bench_capacity.table(played, measured))
        proc = units.in_proc(bar, measured)
        last = played[-1] if played else None
        more = " or more: every step passed (try larger --steps)" \
            if last is not None and last.passes(bar) else ""
        self.stdout.write(f"\nN = {best}{more} live sessions (bar: p95 <= {bar:g} s"
                          f"{f' = {proc} proc' if proc else ''}, no timeout, every click "
                          f"answered)")
        self.stdout.write(f"before: {units.describe(before)}")
        self.stdout.write(f"after:  {units.describe(after)} (proc figures use the mean)")
        for step in played:
            for error in step.errors[:3]:
                self.stderr.write(f"N={step.n}: {error}")

    def _step(self, base, user, target, code, staff, pace, n):
        self._drain()
        sessions = [live_session(user, target, code) for _ in range(n)]
        # Long enough to expect --min-runs clicks in all (the first click comes early).
        expected = self.min_runs * sum(pace.between) / 2 / n
        pace = dataclasses.replace(pace, seconds=max(pace.seconds, expected))
        step = bench_capacity.play(base, [(s.token, s.pk) for s in sessions], staff, pace)
        for pk, status, verdict in Run.objects.filter(
                pk__in=[run for _, run in step.clicks]).values_list("pk", "status", "verdict"):
            step.verdicts[pk] = verdict or status
        return step

    def _drain(self, wait_s: float = 120.0) -> None:
        """Start a step with no run of an earlier one queued or running."""
        deadline = time.monotonic() + wait_s
        while Run.objects.filter(status__in=Run.ACTIVE, created_at__gte=self.started).exists() \
                and time.monotonic() < deadline:
            time.sleep(0.5)
