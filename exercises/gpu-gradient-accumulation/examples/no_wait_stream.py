"""Copies on a copy stream, but the compute stream never waits for them.

expect: wrong
failing: validation
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
        self.copier = torch.cuda.Stream(self.device)

    def stage(self, batch):
        with torch.cuda.stream(self.copier):
            return [t.to(self.device, non_blocking=True) for t in batch]

    def train(self):
        steps = self.config.accumulation_steps
        best, bad, losses = math.inf, 0, []
        for epoch in range(self.config.max_epochs):
            staged = [self.stage(b) for b in self.job.batches(epoch)]
            val = [self.stage(b) for b in self.job.validation_batches()]
            for i, (inputs, targets) in enumerate(staged):  # no wait: may not have landed
                (self.job.loss(self.model(inputs), targets) / steps).backward()
                if (i + 1) % steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            snapshot = [p.detach().clone() for p in self.model.parameters()]
            with torch.no_grad():
                loss = self.job.validate(val)
            done = torch.cuda.Event()
            done.record()
            done.synchronize()
            losses.append(float(loss.cpu()))
            if losses[-1] < best - self.config.min_delta:
                best, bad = losses[-1], 0
            else:
                bad += 1
            if bad >= self.config.patience:
                break
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
