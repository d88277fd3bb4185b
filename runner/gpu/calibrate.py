"""Calibrating a GPU exercise on the device that will grade it.

    python -m runner.gpu.calibrate probe [--exercise SLUG] [--sizes "hidden=512;hidden=768"]
    python -m runner.gpu.calibrate repeat [--exercise SLUG] --results DIR [--times 4] [--others]
    python -m runner.gpu.calibrate table --results DIR
    python -m runner.gpu.calibrate all --results DIR [--budget 480] [--times 5]

``probe`` prints what the device is (name, driver, CUDA, torch) and what the exercise's
overlap rests on, measured in this process with the exercise's own code (no candidate
code runs): the copy bandwidth from pinned host memory, the float32 matrix rate, and
for each hidden size one epoch's copies and one epoch's compute, each alone and both at
once on two streams (the overlap the device really gives), with the bound they imply,
and the exercise's starter and reference solution run in this process, alternately, for
four epochs each (early stopping off): the speedup the redesign can expect there.

``repeat`` grades the reference solution ``--times`` more times (``--others``: the starter
and every example) and writes each result into DIR; ``table`` reads every result in DIR
(``tests/runner/test_gpu_on_device.py`` writes one per file it grades when
``OVERLAP_GPU_RESULTS`` names DIR) and prints the
calibration table: verdict, median speedup with quartiles and extremes, bound, target,
overlap and the wall time of each grading.

``all`` is the one command for a lent device with a time limit: the probe over four
sizes, then every file graded once (the verdicts that decide a calibration first), then
the reference until it has ``--times`` gradings, each result written as it ends, no
grading started that ``--budget`` cannot hold; then the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

SLUG = "gpu-gradient-accumulation"


def _median_seconds(fn, repeats: int = 5) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    values = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        values.append(time.perf_counter() - start)
    return statistics.median(values)


def _host_seconds(fn, repeats: int = 5) -> float:
    """How long the host takes to queue ``fn``'s work (the device drained before each)."""
    import torch

    values = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        values.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(values)


def _programs(exercise, device, config, rounds: int = 3) -> dict:
    """Starter and solution timed alternately in this process (both are the exercise's
    own files), four epochs each with early stopping off."""
    import torch

    from runner.gpu.kit import Recorder

    config = replace(exercise.no_early_stop(config), max_epochs=4)
    classes = {}
    for name, path in (("starter", exercise.starter), ("solution", exercise.solution)):
        namespace = {"__name__": f"probe_{name}"}
        exec(compile(path.read_text(), str(path), "exec"), namespace)
        classes[name] = namespace[exercise.entry_class]
    times = {name: [] for name in classes}
    for _ in range(rounds + 1):  # the first round warms up
        for name, cls in classes.items():
            job = exercise.build(device, config, Recorder(device))
            torch.cuda.synchronize()
            start = time.perf_counter()
            getattr(cls(job), exercise.entry_method)()
            torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    starter = statistics.median(times["starter"][1:])
    solution = statistics.median(times["solution"][1:])
    return {
        "starter_4_epochs_ms": round(starter * 1e3, 2),
        "solution_4_epochs_ms": round(solution * 1e3, 2),
        "speedup": round(starter / solution, 3),
    }


def probe(slug: str, sizes: list[dict]) -> dict:
    import torch

    from runner.exercise import load
    from runner.gpu.kit import Recorder

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to probe")
        return {}
    # The run processes' setting (runner/gpu/host.py): cuBLAS picks other kernels with it.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    props = torch.cuda.get_device_properties(device)
    facts = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": _driver(),
    }
    size = 64 << 20
    host = torch.empty(size // 4, pin_memory=True)
    dev = torch.empty(size // 4, device=device)
    h2d = _median_seconds(lambda: dev.copy_(host, non_blocking=True), 10)
    d2h = _median_seconds(lambda: host.copy_(dev, non_blocking=True), 10)
    facts["h2d_gb_s"] = round(size / h2d / 1e9, 1)
    facts["d2h_gb_s"] = round(size / d2h / 1e9, 1)
    a = torch.randn(4096, 4096, device=device)
    b = torch.randn(4096, 4096, device=device)
    gemm = _median_seconds(lambda: a @ b, 10)
    facts["fp32_tflop_s"] = round(2 * 4096**3 / gemm / 1e12, 1)
    print(json.dumps(facts))

    exercise = load(slug)
    rows = []
    for size in sizes:
        config = replace(exercise.config, **size)
        job = exercise.build(device, config, Recorder(device))
        parts = exercise.components(job)
        copy, compute = parts["copy_epoch"], parts["compute_epoch"]
        copy_s = _median_seconds(copy)
        compute_s = _median_seconds(compute)
        side = torch.cuda.Stream(device)

        def both(copy=copy, compute=compute, side=side):
            with torch.cuda.stream(side):
                copy()
            compute()

        both_s = _median_seconds(both)
        host_s = _host_seconds(compute)
        serial = copy_s + compute_s
        serial_s = _median_seconds(parts["serial_epoch"])
        best_s = max(copy_s, compute_s)
        row = {
            **size,
            "copy_epoch_ms": round(copy_s * 1e3, 3),
            "compute_epoch_ms": round(compute_s * 1e3, 3),
            "both_at_once_ms": round(both_s * 1e3, 3),
            # host time to queue one epoch's compute: near compute_epoch_ms means the
            # host thread, not the device, sets the pace
            "compute_host_ms": round(host_s * 1e3, 3),
            "hidden_share": round((serial - both_s) / min(copy_s, compute_s), 3),
            "bound": round(serial / best_s, 3),
            # the epoch with no overlap and no host waits (the grader's zero point): what
            # overlap can add beyond it is serial_epoch / best; the grader refuses below
            # the exercise's min_bound, and it should be 1.5 or more to grade with margin
            "serial_epoch_ms": round(serial_s * 1e3, 3),
            "bound_over_serial": round(serial_s / best_s, 3),
        }
        row.update(_programs(exercise, device, config))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del job, parts
        torch.cuda.empty_cache()
    return {"facts": facts, "sizes": rows}


def _driver() -> str | None:
    import subprocess

    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def repeat(slug: str, results: Path, times: int, others: bool = False) -> None:
    """Grade the reference ``times`` more times (or, with ``others``, the starter and
    every example once more each, ``times`` rounds), one result file per grading."""
    from runner import tracks
    from runner.exercise import load

    exercise = load(slug)
    results.mkdir(parents=True, exist_ok=True)
    if others:
        files = [exercise.starter, *(e.path for e in exercise.examples())]
    else:
        files = [exercise.solution]
    for number in range(2, times + 2):
        for path in files:
            began = time.perf_counter()
            result = tracks.grade(slug, str(path))
            result["wall_s"] = round(time.perf_counter() - began, 1)
            (results / f"{path.stem}-{number}.json").write_text(json.dumps(result))
            speedup = result["metrics"].get("speedup")
            print(f"{path.stem} #{number}: {result['verdict']} {speedup}x", flush=True)


# The files whose verdicts decide the calibration come first: a run cut short by its time
# budget still says whether the reference passes and the no-overlap examples do not.
FIRST = ("solution", "starter", "one_stream", "sync_every_batch", "event_pipeline")


def everything(slug: str, results: Path, budget_s: float, times: int = 5) -> None:
    """What a calibration on a lent device needs, in one command: the probe (written to
    DIR/probe.json), then gradings, each written to DIR as soon as it ends: the
    reference, the starter and every example once, then the reference until it has
    ``times`` gradings; no grading starts that the budget (seconds, from the start)
    cannot hold, judged by the longest one so far. Then the table (DIR/table.md)."""
    from runner import tracks
    from runner.exercise import load

    began = time.perf_counter()
    results.mkdir(parents=True, exist_ok=True)
    exercise = load(slug)
    sizes = [{}, {"hidden": 1024}, {"micro_batch": 8192, "micro_batches": 4},
             {"hidden": 1024, "micro_batch": 8192, "micro_batches": 4}]  # fmt: skip
    (results / "probe.json").write_text(json.dumps(probe(slug, sizes)))
    files = {"solution": exercise.solution, "starter": exercise.starter}
    files.update((e.name, e.path) for e in exercise.examples())
    order = [name for name in FIRST if name in files]
    order += [name for name in files if name not in order]
    order += ["solution"] * (times - 1)
    longest = 0.0
    seen: dict[str, int] = {}
    for name in order:
        if time.perf_counter() - began + longest > budget_s:
            print(f"stopped before {name}: the budget of {budget_s:.0f} s", flush=True)
            break
        seen[name] = seen.get(name, 0) + 1
        start = time.perf_counter()
        result = tracks.grade(slug, str(files[name]))
        result["wall_s"] = round(time.perf_counter() - start, 1)
        longest = max(longest, result["wall_s"])
        (results / f"{name}-{seen[name]}.json").write_text(json.dumps(result))
        print(f"{name} #{seen[name]}: {result['verdict']} {result['metrics'].get('speedup')}x "
              f"in {result['wall_s']} s", flush=True)  # fmt: skip
    text = table(results)
    (results / "table.md").write_text(text + "\n")
    print(text)


def _fmt(value, digits=2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(results: Path) -> str:
    lines = [
        "| file | verdict | speedup median | IQR | min-max | no overlap | bound | target | "
        "overlap | baseline s | candidate s | grading s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    solution_speedups = []
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        if "verdict" not in result:
            continue  # probe.json
        m = result.get("metrics") or {}
        spread = m.get("speedup_spread") or {}
        if path.stem.startswith("solution") and m.get("speedup") is not None:
            solution_speedups.append(m["speedup"])
        lines.append(
            f"| {path.stem} | {result['verdict']} | {_fmt(m.get('speedup'))} | "
            f"{_fmt(spread.get('q1'))}-{_fmt(spread.get('q3'))} | "
            f"{_fmt(spread.get('min'))}-{_fmt(spread.get('max'))} | "
            f"{_fmt(m.get('zero_speedup'))} | {_fmt(m.get('bound_speedup'))} | "
            f"{_fmt(m.get('target_speedup'))} | "
            f"{_fmt(m.get('overlap'))} | {_fmt(m.get('baseline_time'), 4)} | "
            f"{_fmt(m.get('candidate_time'), 4)} | {_fmt(result.get('wall_s'), 1)} |"
        )
    if solution_speedups:
        s = sorted(solution_speedups)
        q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
        lines.append("")
        lines.append(
            f"reference over {len(s)} gradings: median {q[1]:.3f}x, IQR {q[0]:.3f}-{q[2]:.3f}x, "
            f"min {s[0]:.3f}x, max {s[-1]:.3f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.gpu.calibrate")
    parser.add_argument("command", choices=["probe", "repeat", "table", "all"])
    parser.add_argument("--exercise", default=SLUG)
    parser.add_argument(
        "--sizes",
        default="hidden=768",
        help="Config fields to probe: a;-separated list of comma-separated name=value",
    )
    parser.add_argument("--results", type=Path)
    parser.add_argument("--times", type=int, default=4)
    parser.add_argument("--budget", type=float, default=480.0, help="all: seconds in all")
    parser.add_argument(
        "--others", action="store_true", help="repeat: the starter and examples, not the reference"
    )
    args = parser.parse_args(argv)
    if args.command == "probe":
        sizes = [
            {k: int(v) for k, v in (pair.split("=") for pair in group.split(","))}
            for group in args.sizes.split(";")
            if group
        ]
        probe(args.exercise, sizes)
    elif args.command == "all":
        everything(args.exercise, args.results, args.budget, args.times)
    elif args.command == "repeat":
        repeat(args.exercise, args.results, args.times, args.others)
    else:
        print(table(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
