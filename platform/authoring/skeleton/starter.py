"""Compute one gradient per batch (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and compares what it returns, and what ran when, with this starter's run.

``cluster`` (from ``runner.sim``) holds:

- ``cluster.config``: ``num_workers``, ``num_batches`` and ``compute_cost`` (the
  simulated seconds one gradient takes);
- ``cluster.batches``: the batches, in order;
- ``cluster.workers``: the workers; ``worker.compute_gradient(weights, batch)`` reads
  ``weights`` (``cluster.model``) and returns a ``Gradient``; a worker computes one
  batch at a time;
- ``cluster.model``: the weights the gradients are computed on.

Every operation also has an ``_async`` twin to ``await`` (``compute_gradient_async``):
same cost, but other tasks run meanwhile. The plain form blocks everything.

``train()`` returns the gradients, one per batch, in batch order.
"""


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        workers = self.cluster.workers
        gradients = []
        for i, batch in enumerate(self.cluster.batches):
            worker = workers[i % len(workers)]
            gradients.append(worker.compute_gradient(self.cluster.model, batch))
        return gradients
