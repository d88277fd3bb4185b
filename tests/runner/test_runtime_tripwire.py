"""A program cannot hide what only its own process witnesses, nor reach into the runtime
that reports on it.

Tasks left running and task failures nobody retrieved are counted from the interpreter's
own state at the end; reaching for the machinery (the collector's walks, frames that lead
out of the candidate's code, ctypes, tracing, changing the runtime's classes or modules)
is refused and makes the run a runtime error of its own, never a pass. What the standard
library does for a program (logging, namedtuple, typing, printing a traceback) is not
reaching in."""

import pytest

from runner.sim import grading

PS = "async-parameter-server"

PROGRAM = """
import asyncio
import gc
import inspect
import logging
import os
import sys
import threading
import traceback
from collections import namedtuple
from dataclasses import dataclass
from typing import TypeVar


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = asyncio.Lock()

    async def run(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.lock:
                await self.server.push_async(gradient)

    async def train(self):
        loop = asyncio.get_running_loop()
{snippet}
        await asyncio.gather(*(self.run(w) for w in self.workers))
"""

REACHING_IN = {
    "sys._getframe": "sys._getframe(0).f_back",
    "inspect.stack": "inspect.stack()",
    "a traceback's frame": (
        "try:\n            raise ValueError\n"
        "        except ValueError as exc:\n            exc.__traceback__.tb_frame"
    ),
    "a task's stack": "asyncio.current_task().get_stack()",
    "a coroutine's frame": "coro = self.run(self.workers[0]); coro.cr_frame; coro.close()",
    "gc.get_referrers": "gc.get_referrers(self)",
    "ctypes": "import ctypes; ctypes.string_at(id(self), 8)",
    "tracing": "sys.settrace(lambda *a: None)",
    "a forged file name": "exec(compile('x = 1', os.__file__, 'exec'))",
    "a runtime class": "type(loop).call_exception_handler = lambda self, context: None",
    "the loop's reporting": "loop.call_exception_handler = lambda context: None",
    "a runtime module": (
        "[setattr(m, '_describe', lambda tasks: []) for n, m in list(sys.modules.items())"
        " if n.startswith('runner.candidate') and hasattr(m, '_describe')]"
    ),
    "a runtime function's code": (
        "[setattr(m.live_tasks, '__code__', (lambda exclude=None: ([], [])).__code__)"
        " for n, m in list(sys.modules.items()) if hasattr(m, 'live_tasks')]"
    ),
    "a swallowed refusal": (
        "try:\n            gc.get_objects()\n        except PermissionError:\n            pass"
    ),
}

LEGITIMATE = """
        logging.warning("starting %s", namedtuple("Point", "x y")(1, 2))
        TypeVar("T")
        dataclass(type("Stats", (), {"__annotations__": {"n": "int"}}))
        try:
            raise ValueError("shown, then handled")
        except ValueError:
            traceback.print_exc()
        traceback.print_stack(limit=1)
        await asyncio.sleep(0)
"""


def _grade(tmp_path, snippet: str) -> dict:
    path = tmp_path / "program.py"
    path.write_text(PROGRAM.format(snippet="        " + snippet))
    return grading.grade(PS, path, seeds=1)


@pytest.mark.parametrize("name", sorted(REACHING_IN))
def test_reaching_into_the_runtime_is_a_runtime_error_of_its_own(name, tmp_path):
    result = _grade(tmp_path, REACHING_IN[name])
    assert result["verdict"] == "runtime_error", result["message"]
    assert "reached into the grading runtime" in result["message"]


def test_what_the_standard_library_does_for_a_program_is_not_reaching_in(tmp_path):
    result = _grade(tmp_path, LEGITIMATE.strip())
    assert result["verdict"] == "accepted", result["message"]
    assert "shown, then handled" in result["stderr"]


def test_a_warning_the_runtime_gives_for_the_program_is_not_reaching_in(tmp_path):
    # asyncio.run in a thread refuses (the thread shares the running loop) and the
    # coroutine it was given is never awaited: Python's warning names the runtime's thread
    # wrapper, and `warnings` records it in that module's globals. Not the program's doing.
    snippet = (
        "thread = threading.Thread(target=lambda: asyncio.run(asyncio.sleep(0)))\n"
        "        thread.start()\n        thread.join()"
    )
    result = _grade(tmp_path, snippet)
    assert result["verdict"] == "accepted", result["message"]
    assert "cannot be called from a running event loop" in result["stderr"]


def test_a_failed_task_dropped_before_the_end_still_fails_the_run(tmp_path):
    # Nothing references it: the collector frees it before train() returns, and the
    # error nobody retrieved is reported as it goes.
    snippet = (
        "async def boom():\n            raise KeyError('lost')\n"
        "        asyncio.ensure_future(boom())\n        await asyncio.sleep(0.001)\n"
        "        gc.collect()"
    )
    result = _grade(tmp_path, snippet)
    assert result["verdict"] == "runtime_error", result["message"]
    assert "nobody awaited it" in result["message"] and "lost" in result["message"]
