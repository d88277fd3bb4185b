"""A parameter server with synchronous SGD rounds (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and checks the server's weights, its version count, and what ran when.

``cluster`` (from ``runner.sim``) holds:

- ``cluster.config``: ``num_workers``, ``compute_costs`` (one per worker: some
  workers are slower than others), ``total_batches`` and the other simulated
  costs, in seconds;
- ``cluster.server``: the ``ParameterServer``. ``server.pull()`` returns the
  current ``Params`` (copied shard by shard); ``server.push(gradient)`` applies
  ``weights -= lr * gradient`` shard by shard; ``server.version`` counts pushes;
- ``cluster.workers``: ``worker.compute_gradient(params, batch)`` returns a
  ``Gradient``; a worker computes one batch at a time;
- ``cluster.data``: a shared queue; ``data.next_batch()`` returns the next batch,
  or ``None`` when every batch has been handed out (it costs nothing).

Every operation has an ``_async`` twin to ``await`` (``pull_async``,
``push_async``, ``compute_gradient_async``): same cost, but other tasks run
meanwhile. The plain forms block everything.

``train()`` trains on every batch exactly once; each gradient is pushed once.
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data

    def train(self):
        while True:
            # one round: every worker takes a batch ...
            assignments = []
            for worker in self.workers:
                batch = self.data.next_batch()
                if batch is None:
                    break
                assignments.append((worker, batch))
            if not assignments:
                break
            # ... computes its gradient on the same weights ...
            gradients = []
            for worker, batch in assignments:
                params = self.server.pull()
                gradients.append(worker.compute_gradient(params, batch))
            # ... and the round ends when all gradients are in (the barrier).
            for gradient in gradients:
                self.server.push(gradient)
