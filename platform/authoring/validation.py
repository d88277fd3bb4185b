"""What `python -m runner validate <exercise>` does, one file at a time, in the sandbox.

The runner's validate grades the reference solution (it must be accepted), the starter
(correct but too_slow) and every example (its declared verdict and exactly its declared
failing checks). Here each of those files is graded as candidate code through the
sandbox's public `grade()`, so the author sees progress file by file and no exercise code
ever runs in the web or worker process. Before anything reaches a sandbox, the files are
checked statically (present, compiling, examples declaring what they expect).
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from authoring.folder import written
from content.errors import Problem

REQUIRED = ("grader.py", "starter.py", "solution.py")
EXAMPLE_VERDICTS = (
    "accepted", "wrong", "too_slow", "timeout", "runtime_error", "missing_entry_point",
    "syntax_error",
)


class SandboxMissing(Exception):
    """No sandbox can grade here; not the author's fault."""


@dataclass
class PartPlan:
    file: str
    expected: str
    expected_failing: tuple[str, ...] = ()


def _example_paths(files: dict[str, str]) -> list[str]:
    # The runner globs examples/*.py (direct children), in name order.
    return sorted(
        path for path in files
        if path.startswith("examples/") and path.count("/") == 1 and path.endswith(".py")
    )


def code_problems(slug: str, files: dict[str, str]) -> list[Problem]:
    """What stops a validation before it starts, each naming its file."""
    problems, _ = plan(slug, files)
    return problems


def plan(slug: str, files: dict[str, str]) -> tuple[list[Problem], list[PartPlan]]:
    """The static checks, and the files to grade in the order `runner validate` grades them."""
    from runner.exercise import read_example  # the runner's own parser of expectations

    problems: list[Problem] = []
    for name in REQUIRED:
        if not files.get(name, "").strip():
            problems.append(Problem(name, "", "file is missing or empty (every exercise needs "
                                              "grader.py, starter.py and solution.py)"))
    for path, text in sorted(files.items()):
        if not path.endswith(".py"):
            continue
        try:
            compile(text, path, "exec", dont_inherit=True)  # parses only; nothing runs
        except SyntaxError as exc:
            where = f"line {exc.lineno}" if exc.lineno else ""
            problems.append(Problem(path, where, f"syntax error: {exc.msg}"))
        except ValueError as exc:  # e.g. a NUL character
            problems.append(Problem(path, "", f"cannot be compiled: {exc}"))
    parts = [PartPlan("solution.py", "accepted"), PartPlan("starter.py", "too_slow")]
    examples = _example_paths(files)
    if examples:
        with tempfile.TemporaryDirectory(prefix="overlap-examples-") as tmp:
            for path in examples:
                target = Path(tmp) / Path(path).name
                target.write_text(files[path], encoding="utf-8")
                try:
                    example = read_example(target)
                except SyntaxError:
                    continue  # already reported above
                except ValueError:
                    problems.append(Problem(path, "docstring", "needs an 'expect: <verdict>' "
                                            "line (and 'failing: <checks>' for wrong)"))
                    continue
                if example.verdict not in EXAMPLE_VERDICTS:
                    problems.append(Problem(
                        path, "expect", f"unknown verdict {example.verdict!r} (one of "
                        f"{', '.join(EXAMPLE_VERDICTS)})"))
                    continue
                parts.append(PartPlan(path, example.verdict, example.failing))
    return problems, parts


@dataclass
class Outcome:
    verdict: str
    failing: list[str]
    speedup: float | None
    target_speedup: float | None
    message: str
    checks: list[dict]
    ok: bool
    problem: str
    backend: str
    exercise_broken: bool  # the grader or the starter itself failed: stop validating


def judge(part: PartPlan, result: dict) -> Outcome:
    """The same rules as `runner validate`, applied to one sandboxed result."""
    verdict = str(result.get("verdict", ""))
    message = str(result.get("message", ""))
    checks = [
        {key: check.get(key) for key in ("name", "status", "message", "seed", "scenario")}
        for check in result.get("checks") or [] if isinstance(check, dict)
    ]
    failing = sorted(str(c["name"]) for c in checks if c.get("status") == "fail")
    metrics = result.get("metrics") or {}
    problem = ""
    broken = verdict == "internal_error"
    if broken:
        problem = (f"The exercise itself failed before {part.file} could be graded; check "
                   f"grader.py (does it import?) and starter.py (the baseline): {message}")
    elif part.file == "solution.py":
        if verdict != "accepted":
            problem = f"the reference solution must be accepted: {message}"
    elif part.file == "starter.py":
        if verdict != "too_slow" or failing:
            problem = f"the starter must be correct but too_slow: {message}"
    elif verdict != part.expected or tuple(failing) != tuple(part.expected_failing):
        problem = (f"expected {part.expected} [{', '.join(part.expected_failing)}], got "
                   f"{verdict} [{', '.join(failing)}]: {message}")
    return Outcome(
        verdict=verdict,
        failing=failing,
        speedup=_number(metrics.get("speedup")),
        target_speedup=_number(metrics.get("target_speedup")),
        message=message[:4000],
        checks=checks[:50],
        ok=not problem,
        problem=problem[:4000],
        backend=str((result.get("sandbox") or {}).get("backend", "")),
        exercise_broken=broken,
    )


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def grade_part(*, slug: str, files: dict[str, str], part: PartPlan) -> dict:
    """Grade one file of the exercise as candidate code in a sandbox; the result dict."""
    from runner import sandbox

    data = {path: text.encode() for path, text in files.items()}
    with written(slug, data) as (_root, folder):
        try:
            return sandbox.grade(
                folder,
                files.get(part.file, ""),
                backend=settings.OVERLAP_SANDBOX,
                seeds=settings.OVERLAP_GRADE_SEEDS,
                gpu=settings.OVERLAP_GPU or None,
            )
        except sandbox.SandboxUnavailable as exc:
            raise SandboxMissing(str(exc)) from exc
