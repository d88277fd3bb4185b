"""Starts each send as a background task and hands the activation to the next stage at
once: the next stage computes on a tensor that has not crossed the link yet.

expect: wrong
failing: link_causality
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.stages = cluster.stages
        self.links = cluster.links
        self.microbatches = cluster.microbatches
        self.node_locks = [asyncio.Lock() for _ in self.stages]
        self.depth = asyncio.Semaphore(cluster.config.max_in_flight)

    async def run_microbatch(self, mb):
        sends = []
        async with self.depth:
            x = mb.inputs
            for k, stage in enumerate(self.stages):
                async with self.node_locks[k]:
                    x = await stage.forward_async(mb.id, x)
                if k < len(self.links):
                    sends.append(asyncio.create_task(self.links[k].send_async(x, mb.id)))
            grad = mb.loss_gradient(x)
            for k in reversed(range(len(self.stages))):
                async with self.node_locks[k]:
                    grad = await self.stages[k].backward_async(mb.id, grad)
                if k > 0:
                    sends.append(asyncio.create_task(self.links[k - 1].send_async(grad, mb.id)))
            await asyncio.gather(*sends)

    async def train(self):
        await asyncio.gather(*(self.run_microbatch(mb) for mb in self.microbatches))
