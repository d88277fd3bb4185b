"""Synchronous SGD on a cluster with a spare worker (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and checks what the optimizer steps averaged, what ran when, and what it returns.

``cluster`` (from ``runner.sim``) holds:

- ``cluster.config``: ``gradients_per_step`` (N, the gradients every optimizer step
  averages), ``backup_workers``, ``num_workers`` (N + backups), ``num_steps`` and the
  simulated cost of each operation, in seconds (``compute_cost`` usually; a straggling
  worker's computation takes ``slow_cost``, and nobody knows in advance which one will);
- ``cluster.data``: a shared queue; ``data.next_batch()`` returns a fresh batch (free);
- ``cluster.workers``: the ``num_workers`` workers; ``worker.compute_gradient(model,
  batch)`` reads the model's current weights and returns a ``Gradient``; a worker
  computes one batch at a time;
- ``cluster.buffer``: the shared ``GradientBuffer``; ``buffer.add(gradient)`` sends a
  gradient to it (a read-modify-write that takes time);
- ``cluster.model``: the weights; ``model.step(buffer)`` averages the buffer, empties it
  and applies one SGD update; ``model.snapshot()`` copies the weights.

Every operation also has an ``_async`` twin to ``await`` (``compute_gradient_async``,
``add_async``, ``step_async``, ``snapshot_async``): same cost, but other tasks run
meanwhile, and an awaited computation can be cancelled. The plain forms block
everything.

Each optimizer step averages exactly N gradients computed on the current weights (a
gradient computed before the previous step is stale). ``train()`` runs ``num_steps``
steps and returns a snapshot of the final weights.
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model

    def train_step(self):
        # The first N workers each compute one gradient; the backups stay idle.
        for worker in self.workers[: self.config.gradients_per_step]:
            batch = self.data.next_batch()
            gradient = worker.compute_gradient(self.model, batch)
            self.buffer.add(gradient)
        self.model.step(self.buffer)

    def train(self):
        for _ in range(self.config.num_steps):
            self.train_step()
        return self.model.snapshot()
