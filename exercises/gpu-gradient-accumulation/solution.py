"""Reference solution: every copy on a copy stream, one batch ahead of the compute.

- A second CUDA stream does nothing but copy. Each host batch is queued there with
  ``non_blocking=True`` (the data is in pinned memory, so the copy engine moves it while
  the SMs compute), and a CUDA event marks when it has landed.
- Before the compute stream touches a batch it waits for that event (``wait_event``),
  and it marks the batch's memory as in use by itself (``record_stream``): when Python
  drops the batch, the allocator does not hand the memory to a later copy until the
  compute stream's work on it is done.
- The batches flow as one sequence, training then validation, epoch after epoch: while
  batch i trains, batch i+1 is copied; the validation batches are copied under the
  epoch's last training steps, and the next epoch's first batch under validation.
- The host never waits for a copy. At the end of an epoch it waits only for the
  validation loss (copied into pinned memory behind a CUDA event), after queueing the
  next batch's copy, so the copy engine is busy while Python decides whether to go on.
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
