"""Command line: ``grade``, ``validate`` and ``bench`` (contract in runner/README.md).

``grade`` writes exactly one JSON document to stdout and exits 0 whatever the
verdict; 2 for bad usage, 1 for an internal error (still with a JSON result).
The candidate's own output never reaches the real stdout: file descriptor 1 is
pointed at /dev/null before any candidate code runs, and the result goes to a
duplicate of the original descriptor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

from runner import units

# torch warns on import when NumPy is absent; the runner never needs NumPy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    grade = sub.add_parser("grade", help="grade a code file; one JSON result on stdout")
    grade.add_argument("exercise", help="exercise slug, or a folder with a grader.py")
    grade.add_argument("code", help="the Python file to grade")
    grade.add_argument("--seeds", type=int, default=None, help="shuffled re-runs (default: 20)")
    grade.add_argument("--seed", type=int, default=None, help="replay one shuffle seed only")
    grade.add_argument("--timeout", type=float, default=None, help="real-time watchdog (s)")
    grade.add_argument(
        "--trials", type=int, default=None, help="GPU exercises: timed trials per side"
    )
    grade.add_argument("--indent", type=int, default=None, help="pretty-print the JSON")

    validate = sub.add_parser("validate", help="check an exercise's starter, solution, examples")
    validate.add_argument("exercises", nargs="*", help="slugs or folders (default: all)")
    validate.add_argument("--seeds", type=int, default=None)
    validate.add_argument("--json", action="store_true", help="machine-readable report")

    bench = sub.add_parser("bench", help="CPU time to grade each exercise's solution")
    bench.add_argument("exercises", nargs="*", help="slugs or folders (default: all)")
    bench.add_argument("--repeat", type=int, default=5)

    args = parser.parse_args(argv)
    if args.command == "grade":
        return _grade(args)
    if args.command == "validate":
        return _validate(args)
    return _bench(args)


# -- grade -----------------------------------------------------------------------


def _grade(args) -> int:
    result_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # anything written to fd 1 from now on is dropped
    os.close(devnull)

    def emit(result: dict) -> None:
        text = json.dumps(result, indent=args.indent, allow_nan=False) + "\n"
        data = text.encode()
        while data:
            data = data[os.write(result_fd, data) :]

    from runner.contract import make_result
    from runner.exercise import ExerciseNotFound, find_directory

    def usage_error(message: str) -> int:
        emit(
            make_result(
                exercise=Path(args.exercise).name, verdict="internal_error", message=message
            )
        )
        return EXIT_USAGE

    # Usage errors are answered before importing torch (seconds of start-up).
    if not Path(args.code).is_file():
        return usage_error(f"no such code file: {args.code}")
    try:
        find_directory(args.exercise)
    except ExerciseNotFound as exc:
        return usage_error(str(exc))

    from runner import tracks

    try:
        result = tracks.grade(
            args.exercise,
            args.code,
            seeds=args.seeds,
            replay_seed=args.seed,
            watchdog_seconds=args.timeout,
            trials=args.trials,
        )
    except ExerciseNotFound as exc:  # a grader.py without EXERCISE
        return usage_error(str(exc))
    except Exception as exc:  # a bug in the runner or the exercise, never the candidate's
        host = sys.modules.get("runner.sim.host")
        why = host.grader_tampered() if host else None
        if why:  # ... unless a run sharing the grader's uid broke the grader's limits
            emit(make_result(exercise=Path(args.exercise).name, verdict="runtime_error",
                             message=why))
            return EXIT_OK
        traceback.print_exc(file=sys.__stderr__)
        emit(tracks.internal_error_result(args.exercise, f"internal error: {exc!r}"))
        return EXIT_INTERNAL
    emit(result)
    return EXIT_OK


# -- validate --------------------------------------------------------------------


def _exercises(refs: list[str]):
    from runner.exercise import exercises_dir, load

    if not refs:
        refs = sorted(p.name for p in exercises_dir().iterdir() if (p / "grader.py").is_file())
    return [load(ref) for ref in refs]


def validate_exercise(exercise, seeds: int | None = None) -> list[dict]:
    """Grade the solution, the starter and every example; one row per file.

    A GPU exercise on a machine without a GPU gets verdict needs_gpu for every file:
    those rows are ``skipped`` (and ok), so CI without a GPU stays green."""
    from runner import tracks

    rows = []

    def row(path: Path, label: str, expected: str, expected_failing, problem_fn):
        try:
            result = tracks.grade(exercise.directory, path, seeds=seeds)
        except Exception as exc:  # report it as this file's problem, go on with the others
            result = tracks.internal_error_result(exercise.slug, f"internal error: {exc}")
        failing = sorted(c["name"] for c in result["checks"] if c["status"] == "fail")
        skipped = result["verdict"] == "needs_gpu"
        problem = None if skipped else problem_fn(result, failing)
        rows.append(
            {
                "file": label,
                "expected": expected,
                "expected_failing": list(expected_failing),
                "verdict": result["verdict"],
                "failing": failing,
                "speedup": result["metrics"]["speedup"],
                "message": result["message"],
                "ok": problem is None,
                "problem": problem,
                "skipped": skipped,
            }
        )

    def solution_problem(result, failing):
        if result["verdict"] != "accepted":
            return f"the reference solution must be accepted: {result['message']}"
        return None

    def starter_problem(result, failing):
        if result["verdict"] != "too_slow" or failing:
            return f"the starter must be correct but too_slow: {result['message']}"
        return None

    row(exercise.solution, "solution.py", "accepted", (), solution_problem)
    row(exercise.starter, "starter.py", "too_slow", (), starter_problem)
    for example in exercise.examples():

        def example_problem(result, failing, example=example):
            if result["verdict"] != example.verdict or tuple(failing) != example.failing:
                return (
                    f"expected {example.verdict} [{', '.join(example.failing)}], got "
                    f"{result['verdict']} [{', '.join(failing)}]: {result['message']}"
                )
            return None

        row(
            example.path,
            f"examples/{example.path.name}",
            example.verdict,
            example.failing,
            example_problem,
        )
    return rows


def _validate(args) -> int:
    all_ok = True
    report = {}
    skipped = []
    for exercise in _exercises(args.exercises):
        rows = validate_exercise(exercise, args.seeds)
        report[exercise.slug] = rows
        all_ok = all_ok and all(r["ok"] for r in rows)
        if rows and all(r["skipped"] for r in rows):
            skipped.append(exercise.slug)
            if not args.json:
                print(exercise.slug)
                print(
                    f"  skip GPU validation: no CUDA device here; the solution, the starter "
                    f"and {len(rows) - 2} examples were not graded (run this on a GPU machine)"
                )
            continue
        if args.json:
            continue
        print(exercise.slug)
        for r in rows:
            mark = "skip" if r["skipped"] else "ok  " if r["ok"] else "FAIL"
            speed = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
            failing = f" [{', '.join(r['failing'])}]" if r["failing"] else ""
            print(f"  {mark} {r['file']:<44} {r['verdict']:<14} {speed:>7}{failing}")
            if not r["ok"]:
                print(f"       {r['problem']}")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("all exercises valid" if all_ok else "SOME EXERCISES ARE INVALID")
        if skipped:
            print(f"GPU validation skipped (no GPU): {', '.join(skipped)}")
    return EXIT_OK if all_ok else EXIT_INTERNAL


# -- bench -----------------------------------------------------------------------


def _cpu_seconds(pid: int | str = "self") -> float:
    """CPU seconds of a process and of the children it has reaped (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def bench_exercise(exercise, repeat: int) -> dict:
    """CPU seconds to grade the reference solution: baselines + candidate + all seeds,
    the grader's process and the candidate's processes (forked by the fork server, which
    reaps them) together, and how they split."""
    from runner.sim import grading, host

    rows = []
    result = None
    grading.grade(exercise.directory, exercise.solution, seeds=0)  # the fork server's start
    for _ in range(repeat):
        grading._baselines.clear()  # measure the baseline runs too
        server = host.fork_server().process.pid
        host.STATS.clear()
        grader, candidates = _cpu_seconds(), _cpu_seconds(server)
        result = grading.grade(exercise.directory, exercise.solution)
        grader = _cpu_seconds() - grader
        candidates = _cpu_seconds(server) - candidates
        rows.append((grader + candidates, grader, candidates, dict(host.STATS)))
    rows.sort(key=lambda row: row[0])
    median = rows[len(rows) // 2]
    return {
        "exercise": exercise.slug,
        "runs": result["metrics"]["runs"],
        "verdict": result["verdict"],
        "cpu_min": rows[0][0],
        "cpu_median": median[0],
        "cpu_max": rows[-1][0],
        "grader_median": median[1],
        "candidates_median": median[2],
        "processes": median[3].get("runs", 0),
        "messages": median[3].get("messages", 0),
    }


GRADING_TARGET_PROC = 0.6  # grading CPU per simulated exercise, in proc units


def _in_units(seconds: float, measured: dict) -> str:
    value = units.in_proc(seconds, measured)
    return f" = {value} proc" if value else ""


def _bench(args) -> int:
    measured = units.measure()
    print(units.describe(measured))
    start = time.process_time()
    import torch  # noqa: F401 - start-up, measured apart

    from runner.sim import grading  # noqa: F401

    startup = time.process_time() - start
    print(f"start-up (imports, torch): {startup:.2f} s CPU, not counted below")
    print(
        f"{'exercise':<30} {'runs':>5} {'min':>8} {'median':>8} {'max':>8}   verdict"
        "     (median: grader + candidates' processes; processes, messages)"
    )
    worst = 0.0
    for exercise in _exercises(args.exercises):
        if exercise.track == "gpu":
            print(f"{exercise.slug:<30} skipped: a GPU exercise (timed on the GPU, not here)")
            continue
        row = bench_exercise(exercise, max(1, args.repeat))
        worst = max(worst, row["cpu_median"])
        print(
            f"{row['exercise']:<30} {row['runs']:>5} {row['cpu_min']:>7.3f}s "
            f"{row['cpu_median']:>7.3f}s {row['cpu_max']:>7.3f}s   {row['verdict']:<9}"
            f" ({row['grader_median']:.2f} s + {row['candidates_median']:.2f} s;"
            f" {row['processes']} processes, {row['messages']} messages)"
            f"{_in_units(row['cpu_median'], measured).replace(' = ', '  median = ')}"
        )
    if measured:
        print(f"target: at most {GRADING_TARGET_PROC} proc units per exercise; worst median "
              f"{worst:.3f} s{_in_units(worst, measured)}")
    else:
        print(f"worst median {worst:.3f} s (the target is in proc units: "
              f"{GRADING_TARGET_PROC}; see above)")
    return EXIT_OK
