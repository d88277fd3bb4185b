"""Gradient accumulation with validation and early stopping (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and compares what it returns, and what ran when, with this starter's run.

``cluster`` (from ``runner.sim``) holds:

- ``cluster.config``: ``num_workers``, ``accumulation_steps`` (gradients averaged
  per optimizer step), ``max_epochs``, ``patience``, ``min_delta`` and the
  simulated cost of each operation, in seconds;
- ``cluster.data.epoch(e)``: the micro-batches of epoch ``e``, in order;
- ``cluster.workers``: the workers; ``worker.compute_gradient(weights, batch)``
  reads ``weights`` (the model or a snapshot) and returns a ``Gradient``;
  a worker computes one batch at a time;
- ``cluster.buffer``: the shared ``GradientBuffer``; ``buffer.add(gradient)``
  sends a gradient to it (a read-modify-write that takes time);
- ``cluster.model``: the weights; ``model.step(buffer)`` averages the buffer,
  empties it and applies one SGD update; ``model.snapshot()`` copies the weights;
- ``cluster.validator``: ``validator.validate(snapshot)`` returns the loss.

Every operation also has an ``_async`` twin to ``await`` (``compute_gradient_async``,
``add_async``, ``step_async``, ``snapshot_async``, ``validate_async``): same cost,
but other tasks run meanwhile. The plain forms block everything.

``train()`` returns the snapshot of the weights at the end of the last epoch that
counts: the epoch whose validation triggered early stopping, or the final epoch.
"""

import math


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster
        self.config = cluster.config
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model
        self.validator = cluster.validator

    def train_epoch(self, epoch):
        batches = self.cluster.data.epoch(epoch)
        steps = self.config.accumulation_steps
        for start in range(0, len(batches), steps):
            window = batches[start : start + steps]
            for i, batch in enumerate(window):
                worker = self.workers[i % len(self.workers)]
                gradient = worker.compute_gradient(self.model, batch)
                self.buffer.add(gradient)
            self.model.step(self.buffer)

    def train(self):
        best_loss = math.inf
        epochs_without_improvement = 0
        snapshot = None
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            snapshot = self.model.snapshot()
            loss = self.validator.validate(snapshot)
            if loss < best_loss - self.config.min_delta:
                best_loss = loss
                epochs_without_improvement = 0
            else:
                epochs_without_improvement += 1
            if epochs_without_improvement >= self.config.patience:
                break
        return snapshot
