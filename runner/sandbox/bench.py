"""Sandbox overhead and latency, per backend: `python -m runner.sandbox.bench`.

For each backend that can run here: N runs sequentially and N runs 4 at a time, with and
without the warm pool. Latency is the end-to-end time of one run (what a caller waits);
overhead is latency minus the grading time the sandbox measured (starting the sandbox,
sending the job, collecting the report, cleaning up). A benchmark, not a test: it prints a
table and asserts nothing.

    python -m runner.sandbox.bench [--runs 50] [--backends docker,bwrap] [--grade]

The job is a small program importing torch (as every grading does); --grade runs the
engine on exercises/async-gradient-accumulation's starter instead. Where docker can run
and no sandbox daemon is configured, the `daemon` rows come from a daemon this benchmark
starts (its own warm pool, the same size as the docker rows'): the difference between
the two is the cost of a worker that holds no Docker socket.
"""

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from runner import units
from runner.sandbox.choice import BACKENDS, get_backend
from runner.sandbox.limits import Limits
from runner.sandbox.pool import start_pool, stop_pool
from runner.sandbox.run import grade, run_script

PROGRAM = (  # a grader's shape: torch (preloaded in a warm sandbox), one result document
    "import json, torch\n"
    "from runner.contract import make_result\n"
    "x = torch.ones(64, 64)\n"
    "print(json.dumps(make_result(exercise='bench', verdict='accepted',"
    " message=str(float(x.sum())))))\n"
)
EXERCISE = Path(__file__).resolve().parents[2] / "exercises" / "async-gradient-accumulation"


def _one(backend: str, use_grade: bool) -> tuple[float, float]:
    started = time.monotonic()
    if use_grade:
        code = (EXERCISE / "starter.py").read_text()
        result = grade(EXERCISE, code, seeds=1, backend=backend, allow_unisolated=True)
    else:
        result = run_script(PROGRAM, backend=backend, allow_unisolated=True)
    latency = time.monotonic() - started
    if result["status"] == "error":
        raise RuntimeError(f"{backend}: {result['verdict']}: {result['message']}")
    return latency, latency - (result["sandbox"]["grading_s"] or 0.0)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextlib.contextmanager
def _own_daemon(pool_size: int):
    """A sandbox daemon of this benchmark's own, on a socket in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="overlap-bench-daemon-") as folder:
        path = os.path.join(folder, "sandbox.sock")
        env = {**os.environ, "OVERLAP_SANDBOX_POOL_SIZE": str(pool_size)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.sandbox.daemon", "--socket", path],
            cwd=Path(__file__).resolve().parents[2], env=env, stderr=subprocess.DEVNULL,
        )
        previous = os.environ.get("OVERLAP_SANDBOX_SOCKET")
        os.environ["OVERLAP_SANDBOX_SOCKET"] = path
        try:
            deadline = time.monotonic() + 120
            while get_backend("daemon").problem() and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(5.0 if pool_size else 0.0)  # its pool fills
            yield
        finally:
            proc.terminate()
            proc.wait(timeout=120)
            if previous is None:
                os.environ.pop("OVERLAP_SANDBOX_SOCKET", None)
            else:
                os.environ["OVERLAP_SANDBOX_SOCKET"] = previous


def measure(backend: str, runs: int, concurrency: int, pool: bool, use_grade: bool) -> dict:
    if backend == "daemon" and os.environ.get("OVERLAP_SANDBOX_BENCH_OWN_DAEMON"):
        with _own_daemon(concurrency + 1 if pool else 0):
            return _measure(backend, runs, concurrency, pool, use_grade)
    return _measure(backend, runs, concurrency, pool, use_grade)


def _measure(backend: str, runs: int, concurrency: int, pool: bool, use_grade: bool) -> dict:
    warm = None
    if pool and backend != "daemon":  # a daemon keeps its own pool
        warm = start_pool(backend, size=concurrency + 1, limits=Limits())
        warm.wait_full()
    try:
        _one(backend, use_grade)  # first run: caches, page cache
        if warm is not None:
            warm.wait_full()
        samples = []
        if concurrency == 1:
            for _ in range(runs):
                samples.append(_one(backend, use_grade))
                if warm is not None:
                    warm.wait_full()  # steady state: a warm sandbox is there for each run
        else:
            with ThreadPoolExecutor(concurrency) as executor:
                samples = list(executor.map(lambda _: _one(backend, use_grade), range(runs)))
    finally:
        stop_pool()
    latencies = [s[0] for s in samples]
    overheads = [s[1] for s in samples]
    return {
        "backend": backend,
        "pool": pool,
        "concurrency": concurrency,
        "runs": runs,
        "overhead_p50": statistics.median(overheads),
        "overhead_p95": _percentile(overheads, 0.95),
        "latency_p50": statistics.median(latencies),
        "latency_p95": _percentile(latencies, 0.95),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.sandbox.bench")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--grade", action="store_true", help="grade an exercise's starter")
    parser.add_argument("--pool", choices=("off", "on", "both"), default="both")
    args = parser.parse_args(argv)
    measured = units.measure()  # machine-speed units, in the same run
    rows = []
    for name in args.backends.split(","):
        problem = get_backend(name).problem()
        if name == "daemon" and problem and get_backend("docker").problem() is None:
            os.environ["OVERLAP_SANDBOX_BENCH_OWN_DAEMON"] = "1"
            problem = None
        if problem:
            print(f"{name}: skipped ({problem})", file=sys.stderr)
            continue
        for pool in {"off": (False,), "on": (True,), "both": (False, True)}[args.pool]:
            for concurrency in (1, 4):
                row = measure(name, args.runs, concurrency, pool, args.grade)
                rows.append(row)
                print(_format(row, measured), file=sys.stderr, flush=True)
    print(
        "| backend | pool | concurrent | overhead p50 | overhead p95 | latency p50 | latency p95 "
        "| latency p50 proc | latency p95 proc |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(_format(row, measured))
    print(units.describe(measured))
    return 0


def _format(row: dict, measured: dict) -> str:
    in_units = [units.in_proc(row[key], measured) or "-" for key in ("latency_p50", "latency_p95")]
    return (
        f"| {row['backend']} | {'on' if row['pool'] else 'off'} | {row['concurrency']} "
        f"| {row['overhead_p50']:.3f} s | {row['overhead_p95']:.3f} s "
        f"| {row['latency_p50']:.3f} s | {row['latency_p95']:.3f} s "
        f"| {in_units[0]} | {in_units[1]} |"
    )


if __name__ == "__main__":
    sys.exit(main())
