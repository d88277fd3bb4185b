"""Non-blocking copies from pinned memory, but queued on the compute stream itself: the
host never waits, yet the GPU still copies and computes in turn.

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
        self.copier = self.compute  # non_blocking copies, but on the compute stream

    def stage(self, batch):
        """Queue one host batch's copy on the copy stream."""
        with torch.cuda.stream(self.copier):
            tensors = [t.to(self.device, non_blocking=True) for t in batch]
            landed = torch.cuda.Event()
            landed.record(self.copier)
        return tensors, landed

    def take(self, staged):
        """A staged batch, safe to use on the compute stream."""
        tensors, landed = staged
        self.compute.wait_event(landed)
        for tensor in tensors:
            tensor.record_stream(self.compute)
        return tensors

    def plan(self):
        """Every batch in the order it is used: (epoch, kind, index, host batch)."""
        for epoch in range(self.config.max_epochs):
            for i, batch in enumerate(self.job.batches(epoch)):
                yield epoch, "train", i, batch
            for i, batch in enumerate(self.job.validation_batches()):
                yield epoch, "val", i, batch

    def train(self):
        steps = self.config.accumulation_steps
        best_loss, bad, losses = math.inf, 0, []
        snapshot, validation = None, []
        loss_host = torch.empty((), pin_memory=self.device.type == "cuda")
        plan = self.plan()
        upcoming = next(plan)
        staged = self.stage(upcoming[3])
        last_val = len(self.job.validation_batches()) - 1
        while upcoming is not None:
            epoch, kind, i, _ = upcoming
            upcoming = next(plan, None)
            current, staged = staged, (self.stage(upcoming[3]) if upcoming else None)
            inputs, targets = self.take(current)
            if kind == "train":
                loss = self.job.loss(self.model(inputs), targets) / steps
                loss.backward()
                if (i + 1) % steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                continue
            validation.append((inputs, targets))
            if i < last_val:
                continue
            snapshot = [p.detach().clone() for p in self.model.parameters()]
            with torch.no_grad():
                loss_host.copy_(self.job.validate(validation), non_blocking=True)
            validation = []
            done = torch.cuda.Event()
            done.record(self.compute)
            done.synchronize()  # the next batch is already being copied
            losses.append(float(loss_host))
            if losses[-1] < best_loss - self.config.min_delta:
                best_loss, bad = losses[-1], 0
            else:
                bad += 1
            if bad >= self.config.patience:
                break
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
