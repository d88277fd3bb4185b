"""The reference with a task left running, and a builtin replaced so that the count of
running tasks at the end would find none: ``isinstance`` answers False when asked about
asyncio's task classes. What counts and describes the tasks binds what it uses before
the program runs, so the replaced builtin changes nothing: the task is found, `wrong`
(it was accepted).

expect: wrong
failing: clean_shutdown
"""

import asyncio
import builtins
import math


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
        return self.snapshots[self.last_epoch]


_real = builtins.isinstance


def _blind(obj, classes):
    names = [getattr(c, "__name__", "") for c in classes] if type(classes) is tuple else []
    if any(name.endswith("Task") for name in names):
        return False
    return _real(obj, classes)


builtins.isinstance = _blind
