"""Reference solution: one independent loop per worker, one lock around the server.

- Each worker runs its own task: take a batch, pull, compute, push, repeat until
  the queue is empty. Nobody waits for a slower worker.
- ``server_lock`` makes each pull and each push whole: no torn read, no lost update.
- The lock is held only for the transfer, never across the computation, so
  workers compute at the same time.
- ``train`` awaits every worker loop, so nothing is left running.
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
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
        await asyncio.gather(*(self.worker_loop(worker) for worker in self.workers))
