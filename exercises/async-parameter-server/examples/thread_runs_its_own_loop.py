"""Each worker loop is started in a thread of its own with ``asyncio.run``. In a graded
run, as on a real event loop inside ``train()``, the threads share the running loop, so
``asyncio.run`` refuses ("cannot be called from a running event loop"): the threads die,
no batch is trained, and the warnings about the never-awaited loops are only warnings
(not a reach into the grading runtime).

expect: wrong
failing: every_batch_once, plausible
"""

import asyncio
import threading


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()

    async def worker_loop(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.server_lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        threads = [
            threading.Thread(target=lambda w=w: asyncio.run(self.worker_loop(w)))
            for w in self.workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
