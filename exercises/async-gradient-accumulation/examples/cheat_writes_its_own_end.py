"""The reference, with a task left running at the end; instead of returning, train()
writes the end of the run to the grader itself (the runtime's own channel, reached
through a kit class), listing no task still running, and ends its process. The runtime
seals the end it writes with a key only it holds for this run, and the grader checks the
seal on the frame's bytes: a frame written by the program is refused (it was accepted
before: the grader took the forged end as the run's).

expect: runtime_error
"""

import asyncio
import math
import os


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster
        self.config = cluster.config
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model
        self.validator = cluster.validator
        self.buffer_lock = asyncio.Lock()
        self.stop = asyncio.Event()
        self.best_loss = math.inf
        self.epochs_without_improvement = 0
        self.last_epoch = None
        self.snapshots = {}

    async def run_worker(self, worker, batches):
        for batch in batches:
            gradient = await worker.compute_gradient_async(self.model, batch)
            async with self.buffer_lock:
                await self.buffer.add_async(gradient)

    async def train_window(self, window):
        n = len(self.workers)
        await asyncio.gather(
            *(self.run_worker(worker, window[i::n]) for i, worker in enumerate(self.workers))
        )
        await self.model.step_async(self.buffer)

    async def train_epoch(self, epoch):
        batches = self.cluster.data.epoch(epoch)
        steps = self.config.accumulation_steps
        for start in range(0, len(batches), steps):
            if self.stop.is_set():
                return False
            await self.train_window(batches[start : start + steps])
        return True

    async def validate(self, epoch, snapshot):
        loss = await self.validator.validate_async(snapshot)
        if self.stop.is_set():
            return
        self.last_epoch = epoch
        if loss < self.best_loss - self.config.min_delta:
            self.best_loss = loss
            self.epochs_without_improvement = 0
        else:
            self.epochs_without_improvement += 1
        if self.epochs_without_improvement >= self.config.patience:
            self.stop.set()

    async def train(self):
        validation = None
        for epoch in range(self.config.max_epochs):
            if not await self.train_epoch(epoch):
                break
            self.snapshots[epoch] = await self.model.snapshot_async()
            if validation is not None:
                await validation  # stay at most one epoch ahead of validation
            if self.stop.is_set():
                break
            validation = asyncio.create_task(self.validate(epoch, self.snapshots[epoch]))
        if validation is not None:
            await validation
        self.watchdog = asyncio.create_task(asyncio.Event().wait())  # never cancelled
        # The end of the run, written by the program itself: everything the runtime
        # would say, less the task still running.
        runtime = type(self.model)._overlap_runtime
        runtime.channel.send({
            "k": "end", "t": runtime.now, "ops": runtime.out,
            "value": runtime.encode(self.snapshots[self.last_epoch]),
            "leftover": [], "stdout": "", "stderr": "",
        })
        os._exit(0)
