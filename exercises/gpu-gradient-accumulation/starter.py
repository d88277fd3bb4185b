"""Gradient accumulation fed from host memory, one thing at a time (the starter).

The grader calls ``Trainer(job).train()`` on a CUDA device and compares what it returns,
and what the validation passes saw, with this starter's run.

``job`` holds:

- ``job.config``: ``micro_batches`` per epoch, ``accumulation_steps`` (micro-batches per
  optimizer step), ``max_epochs``, ``patience``, ``min_delta`` (the early-stopping rule),
  and the sizes;
- ``job.device``: the CUDA device the model lives on;
- ``job.model``: an MLP (``torch.nn.Sequential``) on the device, the same fresh weights
  every run;
- ``job.optimizer``: SGD with momentum over ``job.model.parameters()``; the harness
  counts its steps, so use it for every update;
- ``job.batches(epoch)``: the epoch's micro-batches, a list of ``(inputs, targets)``
  tensors in **pinned host memory** (the same every epoch): each must be copied to the
  device before it is trained on;
- ``job.validation_batches()``: the validation set, a list of ``(inputs, targets)``
  tensors in pinned host memory;
- ``job.loss(outputs, targets)``: the training loss (mean squared error);
- ``job.validate(batches)``: the validation loss of ``job.model`` as it is now, over
  ``batches`` (every validation batch, copied to the device, in order), as a 0-d tensor
  on the device. It runs on the *current* CUDA stream and never synchronises.

``train()`` returns a dict: ``"stop_epoch"``, the epoch whose validation triggered early
stopping (or the last epoch); ``"weights"``, the weights at the end of that epoch (a list
of tensors in parameter order); ``"losses"``, the validation loss of every epoch from 0
to ``stop_epoch``, as floats.

This version is correct but slow: every copy is blocking (``.to(device)`` waits until
the data has landed, and everything queued before it has run), so the copy engine and
the SMs take turns and each waits for the other.
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

    def to_device(self, batch):
        inputs, targets = batch
        return inputs.to(self.device), targets.to(self.device)  # waits for the copy

    def train_epoch(self, epoch):
        steps = self.config.accumulation_steps
        for i, batch in enumerate(self.job.batches(epoch)):
            inputs, targets = self.to_device(batch)
            loss = self.job.loss(self.model(inputs), targets) / steps
            loss.backward()
            if (i + 1) % steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def snapshot(self):
        return [p.detach().clone() for p in self.model.parameters()]

    def validate(self):
        batches = [self.to_device(batch) for batch in self.job.validation_batches()]
        with torch.no_grad():
            return self.job.validate(batches).item()  # waits for the GPU

    def train(self):
        best_loss = math.inf
        epochs_without_improvement = 0
        losses = []
        snapshot = None
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            snapshot = self.snapshot()
            loss = self.validate()
            losses.append(loss)
            if loss < best_loss - self.config.min_delta:
                best_loss = loss
                epochs_without_improvement = 0
            else:
                epochs_without_improvement += 1
            if epochs_without_improvement >= self.config.patience:
                break
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
