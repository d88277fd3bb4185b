"""Decides one epoch late (the next epoch trains while a validation is read) but keeps
only the newest snapshot, so it cannot return the stopping epoch's weights.

expect: runtime_error
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
        self.snapshots = {}

    def to_device(self, batch):
        with torch.cuda.stream(self.copier):
            tensors = [t.to(self.device, non_blocking=True) for t in batch]
        self.compute.wait_stream(self.copier)
        for tensor in tensors:
            tensor.record_stream(self.compute)
        return tensors

    def train(self):
        steps = self.config.accumulation_steps
        best, bad, losses, pending = math.inf, 0, [], None
        for epoch in range(self.config.max_epochs):
            for i, batch in enumerate(self.job.batches(epoch)):
                inputs, targets = self.to_device(batch)
                (self.job.loss(self.model(inputs), targets) / steps).backward()
                if (i + 1) % steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            self.snapshots = {epoch: [p.detach().clone() for p in self.model.parameters()]}
            if pending is not None:
                losses.append(pending.item())
                if losses[-1] < best - self.config.min_delta:
                    best, bad = losses[-1], 0
                else:
                    bad += 1
                if bad >= self.config.patience:
                    stop = epoch - 1
                    return {"stop_epoch": stop, "weights": self.snapshots[stop], "losses": losses}
            val = [self.to_device(batch) for batch in self.job.validation_batches()]
            with torch.no_grad():
                pending = self.job.validate(val)
        losses.append(pending.item())
        stop = self.config.max_epochs - 1
        return {"stop_epoch": stop, "weights": self.snapshots[stop], "losses": losses}
