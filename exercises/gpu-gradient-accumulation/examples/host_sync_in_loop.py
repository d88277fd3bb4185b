"""Validation on its own stream, but the host reads each loss with .item() at once.

expect: too_slow
"""

import math

import torch


class Trainer:
    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.model = job.model
        self.optimizer = job.optimizer
        self.train_stream = torch.cuda.current_stream(job.device)
        self.val_stream = torch.cuda.Stream(job.device)

    def train_epoch(self, epoch):
        steps = self.config.accumulation_steps
        for i, (inputs, targets) in enumerate(self.job.batches(epoch)):
            (self.job.loss(self.model(inputs), targets) / steps).backward()
            if (i + 1) % steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def train(self):
        best, bad, losses = math.inf, 0, []
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            snapshot = [p.detach().clone() for p in self.model.parameters()]
            self.val_stream.wait_stream(self.train_stream)
            with torch.cuda.stream(self.val_stream):
                loss = self.job.validate(snapshot).item()  # the host waits right here
            for tensor in snapshot:
                tensor.record_stream(self.val_stream)
            losses.append(loss)
            if loss < best - self.config.min_delta:
                best, bad = loss, 0
            else:
                bad += 1
            if bad >= self.config.patience:
                break
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
