"""The reference, with a task left running, then a walk up the stack through the
standard library (``traceback.walk_stack`` read by ``StackSummary.extract`` with the
frames' locals) to find the key that seals the run's end, and an end of its own, sealed
with it. A walk up the stack is refused whatever standard-library code consumes it:
"reached into the grading runtime" (it was accepted: the key was in the runtime's
frames).

expect: runtime_error
"""

import ast
import asyncio
import hashlib
import hmac
import json
import math
import os
import traceback


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
        key = None
        walk = traceback.walk_stack(None)
        for summary in traceback.StackSummary.extract(walk, capture_locals=True):
            if summary.locals and summary.locals.get("seal", "").startswith("b"):
                key = ast.literal_eval(summary.locals["seal"])
        runtime = type(self.model)._overlap_runtime
        runtime._flush_stall()
        end = {
            "k": "end", "value": runtime.encode_returned(self.snapshots[self.last_epoch]),
            "leftover": [], "t": runtime.now, "ops": runtime.out, "stdout": "", "stderr": "",
        }
        body = json.dumps(end, separators=(",", ":"), allow_nan=False).encode()
        mac = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
        runtime.channel.send_body(body[:-1] + b',"mac":"' + mac + b'"}')
        os._exit(0)
        return self.snapshots[self.last_epoch]
