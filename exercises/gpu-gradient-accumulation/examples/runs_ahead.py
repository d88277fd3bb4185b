"""Copies overlapped correctly, but it never waits for a validation result: it trains
every epoch and applies the patience rule at the end, far past the stopping epoch.

expect: wrong
failing: wasted_work
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

    def stage(self, batch):
        with torch.cuda.stream(self.copier):
            tensors = [t.to(self.device, non_blocking=True) for t in batch]
        return tensors, self.copier.record_event()

    def take(self, staged):
        tensors, landed = staged
        self.compute.wait_event(landed)
        for tensor in tensors:
            tensor.record_stream(self.compute)
        return tensors

    def train(self):
        steps = self.config.accumulation_steps
        snapshots, results = [], []
        for epoch in range(self.config.max_epochs):
            staged = [self.stage(b) for b in self.job.batches(epoch)]
            val = [self.stage(b) for b in self.job.validation_batches()]
            for i, batch in enumerate(staged):
                inputs, targets = self.take(batch)
                (self.job.loss(self.model(inputs), targets) / steps).backward()
                if (i + 1) % steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            snapshots.append([p.detach().clone() for p in self.model.parameters()])
            with torch.no_grad():
                results.append(self.job.validate([self.take(b) for b in val]))
        best, bad, losses = math.inf, 0, []
        for loss in results:
            losses.append(loss.item())
            if losses[-1] < best - self.config.min_delta:
                best, bad = losses[-1], 0
            else:
                bad += 1
            if bad >= self.config.patience:
                break
        stop = len(losses) - 1
        return {"stop_epoch": stop, "weights": snapshots[stop], "losses": losses}
