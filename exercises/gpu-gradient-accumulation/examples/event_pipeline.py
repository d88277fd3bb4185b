"""A second correct design: a whole epoch staged at once, an event per batch, and every
batch kept referenced until the epoch's validation has finished (no record_stream).

expect: accepted
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
        # A high-priority copy stream: a copy goes first whenever the engine is free.
        self.copier = torch.cuda.Stream(self.device, priority=-1)
        self.pinned_loss = torch.empty((), pin_memory=self.device.type == "cuda")

    def stage_all(self, batches):
        staged = []
        with torch.cuda.stream(self.copier):
            for batch in batches:
                tensors = [t.to(self.device, non_blocking=True) for t in batch]
                staged.append((tensors, self.copier.record_event()))
        return staged

    def train(self):
        steps = self.config.accumulation_steps
        compute = torch.cuda.current_stream(self.device)
        best, bad, losses = math.inf, 0, []
        upcoming = self.stage_all(self.job.batches(0))
        for epoch in range(self.config.max_epochs):
            staged = upcoming + self.stage_all(self.job.validation_batches())
            train, val = staged[: self.config.micro_batches], staged[self.config.micro_batches :]
            for i, ((inputs, targets), landed) in enumerate(train):
                compute.wait_event(landed)
                (self.job.loss(self.model(inputs), targets) / steps).backward()
                if (i + 1) % steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            for _, landed in val:
                compute.wait_event(landed)
            snapshot = [p.detach().clone() for p in self.model.parameters()]
            with torch.no_grad():
                self.pinned_loss.copy_(self.job.validate([b for b, _ in val]), non_blocking=True)
            finished = compute.record_event()
            if epoch + 1 < self.config.max_epochs:
                upcoming = self.stage_all(self.job.batches(epoch + 1)[:1])
            finished.synchronize()  # also: nothing still reads this epoch's batches
            losses.append(float(self.pinned_loss))
            if losses[-1] < best - self.config.min_delta:
                best, bad = losses[-1], 0
            else:
                bad += 1
            if bad >= self.config.patience:
                break
            if epoch + 1 < self.config.max_epochs:
                upcoming += self.stage_all(self.job.batches(epoch + 1)[1:])
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
