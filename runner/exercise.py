"""What an exercise declares (in ``exercises/<slug>/grader.py``) and how it is found.

A grader module defines ``EXERCISE = Exercise(...)``: how to build the simulated
cluster for each scenario, the checks, the speedup target and the theoretical bound.
A GPU exercise defines ``EXERCISE = GpuExercise(...)`` instead (real PyTorch on a CUDA
device, graded by ``runner/gpu/grading.py``).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_EXERCISES_DIR = Path(__file__).resolve().parent.parent / "exercises"
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class ExerciseNotFound(Exception):
    pass


@dataclass
class Scenario:
    """One configuration the program is run on.

    The ``timed`` scenario (exactly one) gives the speedup; every scenario is
    checked for correctness. ``seeds`` caps the shuffled re-runs for this
    scenario (None: as many as the grading asks for).
    """

    name: str
    config: Any
    timed: bool = False
    seeds: int | None = None


@dataclass
class Exercise:
    """The code side of an exercise.

    build(sim, config) -> Cluster     the simulated hardware for one run
    check(run, baseline) -> [Check]   correctness checks of one candidate run, given
                                      the baseline's run of the same scenario; the
                                      same names, in the same order, every time
    bound(baseline) -> float          the theoretical best speedup for the timed scenario
    """

    build: Callable
    check: Callable
    scenarios: list[Scenario]
    target_speedup: float
    bound: Callable
    bound_note: str = ""
    entry_class: str = "Trainer"
    entry_method: str = "train"
    seeds: int = 20
    work_ops: tuple[str, ...] = ("compute",)  # ops whose total time is the work to be done
    work: Callable | None = None  # work(run) -> number, if not the time spent in work_ops
    time_limit_factor: float = 20.0  # virtual limit = factor x the baseline's makespan
    # filled in by the loader
    slug: str = ""
    directory: Path = field(default_factory=Path)

    track = "simulated"

    @property
    def timed(self) -> Scenario:
        return next(s for s in self.scenarios if s.timed)

    @property
    def starter(self) -> Path:
        return self.directory / "starter.py"

    @property
    def solution(self) -> Path:
        return self.directory / "solution.py"

    def examples(self) -> list[Example]:
        folder = self.directory / "examples"
        if not folder.is_dir():
            return []
        return [read_example(p) for p in sorted(folder.glob("*.py"))]


@dataclass
class GpuExercise:
    """The code side of a GPU exercise (graded by ``runner/gpu/grading.py``).

    build(device, config, recorder) -> job      what ``Trainer(job)`` receives: fresh for
                                                every run, fixed seeds only
    check(run, reference) -> [Check]            correctness of one run against the
                                                sequential reference; the same names, in
                                                the same order, every time
    reference(trajectory, run) -> reference     what checks compare with, from the
                                                starter's run without early stopping
                                                (every epoch) and its normal run
    no_early_stop(config) -> config             the config of the trajectory run
    components(job) -> {name: fn}               pieces of the work, each timed alone
    best_time(reference, seconds) -> float      the shortest time any correct program can
                                                take, from the components' median times
    serial_time(reference, seconds) -> float    optional: the time of the same work with
                                                no overlap and no host waits either (from
                                                the components): the zero point of overlap,
                                                so a program that only stops the host
                                                waiting hides nothing; without it the
                                                baseline's time is the zero point
    work(run) -> {name: count}                  work done through the harness
    prepare(device_type) -> None                optional: host-side work every run on a
                                                "cuda" or "cpu" device shares (data made
                                                on the CPU), done once in the fork server,
                                                before any run, on one thread
    """

    build: Callable
    check: Callable
    reference: Callable
    no_early_stop: Callable
    components: Callable
    best_time: Callable
    work: Callable
    config: Any  # the sizes on a GPU
    cpu_config: Any  # small sizes, for running the same path on a CPU (tests)
    target_overlap: float = 0.5  # share of the hideable time the candidate must hide
    min_bound: float = 1.15  # bound / zero point below this: the GPU cannot tell designs
    # apart, refuse to grade
    bound_margin: float = 0.15  # allowance for noise before a speedup is implausible
    bound_note: str = ""
    trials: int = 7
    warmups: int = 1
    component_trials: int = 9
    prepare: Callable | None = None
    serial_time: Callable | None = None
    entry_class: str = "Trainer"
    entry_method: str = "train"
    time_limit_factor: float = 20.0  # a run may take this many times the reference's time
    # filled in by the loader
    slug: str = ""
    directory: Path = field(default_factory=Path)

    track = "gpu"

    @property
    def starter(self) -> Path:
        return self.directory / "starter.py"

    @property
    def solution(self) -> Path:
        return self.directory / "solution.py"

    def examples(self) -> list[Example]:
        return Exercise.examples(self)


def exercises_dir() -> Path:
    return Path(os.environ.get("OVERLAP_EXERCISES", DEFAULT_EXERCISES_DIR))


def find_directory(ref: str | Path) -> Path:
    """An exercise folder from a slug (looked up in the exercises folder) or a path."""
    path = Path(ref)
    if (path / "grader.py").is_file():
        return path.resolve()
    if isinstance(ref, str) and SLUG.match(ref):
        candidate = exercises_dir() / ref
        if (candidate / "grader.py").is_file():
            return candidate.resolve()
        raise ExerciseNotFound(f"no exercise {ref!r} in {exercises_dir()} (no grader.py)")
    raise ExerciseNotFound(f"{ref!r} is neither an exercise slug nor a folder with a grader.py")


_loaded: dict[Path, Exercise] = {}


def load(ref: str | Path) -> Exercise:
    directory = find_directory(ref)
    if directory in _loaded:
        return _loaded[directory]
    grader = directory / "grader.py"
    name = "overlap_grader_" + re.sub(r"\W", "_", directory.name)
    spec = importlib.util.spec_from_file_location(name, grader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    exercise = getattr(module, "EXERCISE", None)
    if not isinstance(exercise, Exercise | GpuExercise):
        raise ExerciseNotFound(f"{grader} defines no EXERCISE = Exercise(...)")
    if isinstance(exercise, Exercise) and sum(s.timed for s in exercise.scenarios) != 1:
        raise ExerciseNotFound(f"{grader}: exactly one scenario must be timed")
    exercise.slug = directory.name
    exercise.directory = directory
    _loaded[directory] = exercise
    return exercise


@dataclass
class Example:
    """A graded example solution and the verdict it must get.

    Declared in the example's module docstring::

        \"\"\"Workers add to the buffer without a lock.

        expect: wrong
        failing: accumulation, final_weights
        \"\"\"
    """

    path: Path
    title: str
    verdict: str
    failing: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.stem


def read_example(path: Path) -> Example:
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    fields = dict(
        (key.strip().lower(), value.strip())
        for key, sep, value in (line.partition(":") for line in doc.splitlines())
        if sep and key.strip().lower() in ("expect", "failing")
    )
    if "expect" not in fields:
        raise ValueError(f"{path}: the docstring needs an 'expect: <verdict>' line")
    failing = tuple(sorted(n.strip() for n in fields.get("failing", "").split(",") if n.strip()))
    title = doc.strip().splitlines()[0] if doc.strip() else path.stem
    return Example(path, title, fields["expect"], failing)
