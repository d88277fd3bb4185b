"""A copy stream and non-blocking copies, but the device is synchronised after every
micro-batch ("one batch in flight keeps memory bounded") and the next copy is queued
only then: copy and compute still take turns, as in the starter.

expect: too_slow
"""

import math

import torch


class Trainer:
    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.device = job.device
        self.model = job.model
        self.optimizer = job.optimizer
        self.compute = torch.cuda.current_stream(self.device)
        self.copier = torch.cuda.Stream(self.device)

    def to_device(self, batch):
        with torch.cuda.stream(self.copier):
            tensors = [t.to(self.device, non_blocking=True) for t in batch]
        self.compute.wait_stream(self.copier)
        for tensor in tensors:
            tensor.record_stream(self.compute)
        return tensors

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
                torch.cuda.synchronize()
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
