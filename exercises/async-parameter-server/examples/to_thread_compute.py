"""Computes in a thread (asyncio.to_thread on the blocking compute_gradient) while the
event loop serves the other workers; pulls and pushes under an asyncio.Lock. Correct and
concurrent, as it would be with real threads.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = asyncio.Lock()

    async def run(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.lock:
                params = await self.server.pull_async()
            gradient = await asyncio.to_thread(worker.compute_gradient, params, batch)
            async with self.lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.run(w) for w in self.workers))
