"""The starter's serial code, with every clock and wait it can reach patched to report
a fast run: time.perf_counter, time.monotonic, CUDA events' elapsed_time and
torch.cuda.synchronize.

The grader's clock runs in the grading process, which this code never reaches, so it
measures the real (serial) time.

expect: too_slow
"""

import math
import time

import torch

_start = time.perf_counter()
time.perf_counter = lambda: _start  # no time ever passes
time.monotonic = lambda: _start
torch.cuda.Event.elapsed_time = lambda self, other: 0.001
torch.cuda.synchronize = lambda device=None: None


class Trainer:
    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.device = job.device
        self.model = job.model
        self.optimizer = job.optimizer

    def to_device(self, batch):
        return [t.to(self.device) for t in batch]

    def train(self):
        steps = self.config.accumulation_steps
        best, bad, losses = math.inf, 0, []
        for epoch in range(self.config.max_epochs):
            for i, batch in enumerate(self.job.batches(epoch)):
                inputs, targets = self.to_device(batch)
                (self.job.loss(self.model(inputs), targets) / steps).backward()
                if (i + 1) % steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            snapshot = [p.detach().clone() for p in self.model.parameters()]
            val = [self.to_device(batch) for batch in self.job.validation_batches()]
            with torch.no_grad():
                losses.append(self.job.validate(val).item())
            if losses[-1] < best - self.config.min_delta:
                best, bad = losses[-1], 0
            else:
                bad += 1
            if bad >= self.config.patience:
                break
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
