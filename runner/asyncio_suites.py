"""CPython's own asyncio test suites, run on the candidates' event loop.

    python -m runner.asyncio_suites [--seeds 1-20] [--module test_locks ...]

Every test gets a fresh ``runner.candidate.loop.standalone_loop(seed=S)`` (virtual time,
stock FIFO ready queue, timers due at the same instant released in a seeded order)
through an event-loop policy; each seed runs every listed module. A test passes as it
would on a stock loop; an error or failure is listed with its seed, and the exit status
is 1 if any test failed under any seed. ``BaseException`` is caught per test (the loop's
``Deadlock`` is one).

Needs the interpreter's ``test`` package (CPython's test suite), as in python.org and
pyenv builds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import unittest

MODULES = [
    "test_locks",
    "test_queues",
    "test_taskgroups",
    "test_timeouts",
    "test_waitfor",
    "test_pep492",
    "test_futures",
    "test_runners",
    "test_tasks",
]


class _Policy(asyncio.DefaultEventLoopPolicy):
    def __init__(self, seed: int | None) -> None:
        super().__init__()
        self.seed = seed

    def new_event_loop(self):
        from runner.candidate.loop import standalone_loop

        return standalone_loop(self.seed)


class _Guarded(unittest.TestResult):
    """A result that turns any BaseException escaping a test into an error."""


def _run_case(case: unittest.TestCase, result: unittest.TestResult) -> None:
    try:
        case.run(result)
    except BaseException as exc:
        result.addError(case, (type(exc), exc, exc.__traceback__))


def _cases(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _cases(item)
        else:
            yield item


def run(seed: int | None, modules: list[str]) -> tuple[int, list[str]]:
    asyncio.set_event_loop_policy(_Policy(seed))
    loader = unittest.TestLoader()
    total, problems = 0, []
    for name in modules:
        suite = loader.loadTestsFromName(f"test.test_asyncio.{name}")
        result = unittest.TestResult()
        for case in _cases(suite):
            if isinstance(case, unittest.loader._FailedTest):  # an import error
                problems.append(f"{name}: could not load ({case.id()})")
                continue
            _run_case(case, result)
            total += 1
        for case, text in result.errors + result.failures:
            last = text.strip().splitlines()[-1] if text.strip() else ""
            problems.append(f"seed {seed}: {case.id()}: {last}")
    asyncio.set_event_loop_policy(None)
    return total, problems


def _seeds(text: str) -> list[int | None]:
    if text == "fifo":
        return [None]
    if "-" in text:
        first, last = (int(x) for x in text.split("-"))
        return list(range(first, last + 1))
    return [int(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.asyncio_suites")
    parser.add_argument("--seeds", default="1-20", help="e.g. 1-20, 1,5,9 or fifo")
    parser.add_argument("--module", action="append", help="a test.test_asyncio module")
    args = parser.parse_args(argv)
    modules = args.module or MODULES
    failed = False
    for seed in _seeds(args.seeds):
        total, problems = run(seed, modules)
        print(f"seed {seed}: {total - len(problems)} of {total} passed", flush=True)
        for problem in problems:
            print("  " + problem)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
