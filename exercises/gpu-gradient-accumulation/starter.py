"""Gradient accumulation on a GPU, validation inline and blocking (the starter).

The grader calls ``Trainer(job).train()`` on a CUDA device and compares what it returns,
and what the validation passes saw, with this starter's run.

``job`` holds:

- ``job.config``: ``micro_batches`` per epoch, ``accumulation_steps`` (micro-batches per
  optimizer step), ``max_epochs``, ``patience``, ``min_delta`` (the early-stopping rule),
  and the sizes;
- ``job.device``: the CUDA device everything lives on;
- ``job.model``: a small MLP (``torch.nn.Sequential``) on the device, the same fresh
  weights every run;
- ``job.optimizer``: SGD with momentum over ``job.model.parameters()``; the harness
  counts its steps, so use it for every update;
- ``job.batches(epoch)``: the epoch's micro-batches, a list of ``(inputs, targets)``
  tensors already on the device;
- ``job.loss(outputs, targets)``: the training loss (mean squared error);
- ``job.validate(weights)``: the validation loss of the model with ``weights`` (a list of
  tensors in ``job.model.parameters()`` order) as a 0-d tensor on the device. It runs on
  the *current* CUDA stream, launches many small kernels and never synchronises.

``train()`` returns a dict: ``"stop_epoch"``, the epoch whose validation triggered early
stopping (or the last epoch); ``"weights"``, the weights at the end of that epoch (a list
of tensors in parameter order); ``"losses"``, the validation loss of every epoch from 0
to ``stop_epoch``, as floats.

This version is correct but slow: after every epoch it validates on the training
stream and waits for the answer (``.item()``), so the GPU does one thing at a time and
sits idle while Python decides whether to go on.
"""

import math

import torch


class Trainer:
    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.model = job.model
        self.optimizer = job.optimizer

    def train_epoch(self, epoch):
        steps = self.config.accumulation_steps
        for i, (inputs, targets) in enumerate(self.job.batches(epoch)):
            loss = self.job.loss(self.model(inputs), targets) / steps
            loss.backward()
            if (i + 1) % steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def snapshot(self):
        return [p.detach().clone() for p in self.model.parameters()]

    def train(self):
        best_loss = math.inf
        epochs_without_improvement = 0
        losses = []
        snapshot = None
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            snapshot = self.snapshot()
            with torch.no_grad():
                loss = self.job.validate(snapshot).item()  # waits for the GPU
            losses.append(loss)
            if loss < best_loss - self.config.min_delta:
                best_loss = loss
                epochs_without_improvement = 0
            else:
                epochs_without_improvement += 1
            if epochs_without_improvement >= self.config.patience:
                break
        return {"stop_epoch": epoch, "weights": snapshot, "losses": losses}
