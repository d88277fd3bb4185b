"""A second correct design: a pool of idle workers and an event for early stopping.

expect: accepted
"""

import asyncio
import math


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster
        self.config = cluster.config
        self.model = cluster.model
        self.buffer = cluster.buffer
        self.validator = cluster.validator
        self.idle = asyncio.Queue()
        for worker in cluster.workers:
            self.idle.put_nowait(worker)
        self.lock = asyncio.Lock()
        self.stop = asyncio.Event()
        self.history = []

    async def gradient(self, batch):
        worker = await self.idle.get()
        try:
            gradient = await worker.compute_gradient_async(self.model, batch)
        finally:
            self.idle.put_nowait(worker)
        async with self.lock:
            await self.buffer.add_async(gradient)

    async def check(self, epoch, snapshot):
        loss = await self.validator.validate_async(snapshot)
        self.history.append((epoch, loss, snapshot))
        best, bad = math.inf, 0
        for _, value, _ in self.history:
            if value < best - self.config.min_delta:
                best, bad = value, 0
            else:
                bad += 1
        if bad >= self.config.patience:
            self.stop.set()

    async def train(self):
        pending = None
        n = self.config.accumulation_steps
        for epoch in range(self.config.max_epochs):
            batches = self.cluster.data.epoch(epoch)
            for start in range(0, len(batches), n):
                if self.stop.is_set():
                    break
                await asyncio.gather(*(self.gradient(b) for b in batches[start : start + n]))
                await self.model.step_async(self.buffer)
            if self.stop.is_set():
                break
            snapshot = await self.model.snapshot_async()
            if pending:
                await pending
                if self.stop.is_set():
                    break
            pending = asyncio.create_task(self.check(epoch, snapshot))
        if pending:
            await pending
        return self.history[-1][2]
