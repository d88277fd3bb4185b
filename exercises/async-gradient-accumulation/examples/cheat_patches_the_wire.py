"""The reference with a task left running, and the runtime's message encoder wrapped so
that the end of the run would go out without its list of running tasks. The end is
encoded by the runtime's own C encoder, made before the program runs, so the wrapper
changes nothing: the task is reported, `wrong` (it was accepted).

expect: wrong
failing: clean_shutdown
"""

import asyncio
import math
import sys


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


_wire = sys.modules["runner.protocol"]
_encode = _wire._ENCODE


def _without_leftovers(message):
    if isinstance(message, dict) and message.get("k") == "end":
        message = {k: v for k, v in message.items() if k != "leftover"}
    return _encode(message)


_wire._ENCODE = _without_leftovers
