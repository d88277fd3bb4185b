"""What one run may cost the grader is bounded, whatever the program does.

A program that floods the grader (thousands of kit operations in flight, an endless
stream of calls, reads in a busy loop) once cost it 40-156 s of CPU per grading and
ended as "an endless loop that never awaits?" or an internal error. Each bound now ends
the run at once with a runtime error that names it."""

import pytest

from runner.sim import grading

PS = "async-parameter-server"

HEADER = """
import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
"""

FLOODS = {
    "one instant": (
        """
    async def train(self):
        await asyncio.gather(*(self.server.pull_async() for _ in range(5000)))
""",
        "started more than 4,096 kit operations at one instant",
    ),
    "in flight": (
        """
    async def spam(self):
        while True:
            await self.server.pull_async()

    async def train(self):
        tasks = [asyncio.create_task(self.spam()) for _ in range(3000)]
        await asyncio.sleep(1000)
""",
        "had more than 1,000 kit operations running at once",
    ),
    "in one run": (
        """
    async def spam(self):
        while True:
            await self.server.pull_async()

    async def train(self):
        tasks = [asyncio.create_task(self.spam()) for _ in range(900)]
        await asyncio.sleep(1000)
""",
        "started more than 20,000 kit operations in one run",
    ),
    "messages": (
        """
    def train(self):
        while True:
            self.server.version
""",
        "exchanged more than 50,000 messages with the grader",
    ),
}


@pytest.mark.parametrize("name", sorted(FLOODS))
def test_a_flood_ends_the_run_with_an_error_that_names_the_bound(name, tmp_path):
    body, said = FLOODS[name]
    path = tmp_path / "flood.py"
    path.write_text(HEADER + body)
    result = grading.grade(PS, path, seeds=1)
    assert result["verdict"] == "runtime_error", result["message"]
    assert said in result["message"]
