"""Waits until num_stages micro-batches have gone forward before any backward
starts: fine for m >= p, a deadlock when there are fewer micro-batches than stages.

expect: timeout
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.stages = cluster.stages
        self.links = cluster.links
        self.microbatches = cluster.microbatches
        self.node_locks = [asyncio.Lock() for _ in self.stages]
        self.depth = asyncio.Semaphore(self.config.max_in_flight)
        self.forwarded = 0
        self.pipeline_full = asyncio.Event()

    async def run_microbatch(self, mb):
        async with self.depth:
            x = mb.inputs
            for k, stage in enumerate(self.stages):
                async with self.node_locks[k]:
                    x = await stage.forward_async(mb.id, x)
                if k < len(self.links):
                    x = await self.links[k].send_async(x, mb.id)
            self.forwarded += 1
            if self.forwarded == len(self.stages):
                self.pipeline_full.set()
            await self.pipeline_full.wait()  # never set if m < p
            grad = mb.loss_gradient(x)
            for k in reversed(range(len(self.stages))):
                async with self.node_locks[k]:
                    grad = await self.stages[k].backward_async(mb.id, grad)
                if k > 0:
                    grad = await self.links[k - 1].send_async(grad, mb.id)

    async def train(self):
        await asyncio.gather(*(self.run_microbatch(mb) for mb in self.microbatches))
