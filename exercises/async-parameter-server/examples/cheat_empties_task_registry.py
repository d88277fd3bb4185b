"""Cheat: leaves a task waiting on a queue forever, then empties the runtime's record of
the tasks it made (and tries to reset its count) so that nothing looks left running. The
count only goes up, so the emptied record shows: "reached into the grading runtime"
(and the task still running is found by the interpreter's own object walk anyway).

expect: runtime_error
"""

import asyncio
import contextlib
import sys


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
        q = asyncio.Queue()
        self.stuck = asyncio.create_task(q.get())  # left waiting forever
        await asyncio.gather(*(self.run(w) for w in self.workers))
        for name, module in list(sys.modules.items()):
            if name.startswith("runner.candidate") and hasattr(module, "REGISTRY"):
                module.REGISTRY.clear()
                with contextlib.suppress(TypeError):  # a count that cannot be set back
                    module.CREATED[0] = 0
