"""Holds a node's lock while waiting for the next node's: forward and backward
walk the locks in opposite orders and deadlock.

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

    async def run_microbatch(self, mb):
        async with self.depth:
            x = mb.inputs
            held = None
            for k, stage in enumerate(self.stages):
                await self.node_locks[k].acquire()  # take the next node before leaving this one
                if held is not None:
                    held.release()
                held = self.node_locks[k]
                x = await stage.forward_async(mb.id, x)
                if k < len(self.links):
                    x = await self.links[k].send_async(x, mb.id)
            held.release()
            grad = mb.loss_gradient(x)
            held = None
            for k in reversed(range(len(self.stages))):
                await self.node_locks[k].acquire()
                if held is not None:
                    held.release()
                held = self.node_locks[k]
                grad = await self.stages[k].backward_async(mb.id, grad)
                if k > 0:
                    grad = await self.links[k - 1].send_async(grad, mb.id)
            held.release()

    async def train(self):
        await asyncio.gather(*(self.run_microbatch(mb) for mb in self.microbatches))
