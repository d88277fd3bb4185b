"""Training with checkpoints (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and checks the training steps, every checkpoint written, and what storage holds when
``train()`` returns.

``cluster`` holds:

- ``cluster.config``: ``num_steps``, ``checkpoint_every`` (a checkpoint after every
  ``checkpoint_every``-th step: steps 2, 4, ...), ``max_in_flight`` (host memory holds
  that many checkpoint copies: at most that many storage writes at once) and the
  simulated cost of each operation, in seconds;
- ``cluster.batches``: the batches; step ``s + 1`` trains ``batches[s]``;
- ``cluster.model``: the weights and optimizer state on the GPU. ``model.step`` counts
  the steps applied; ``model.train_step(batch)`` runs one step;
  ``model.snapshot()`` copies weights and optimizer state to host memory (fast) and
  returns a ``HostCopy`` of the current step; ``model.restore(copy)`` loads one back.
  The GPU runs one operation at a time;
- ``cluster.storage``: slow, durable storage. ``storage.write(state)`` writes a
  checkpoint (the weights first, then the optimizer state, each read when its half of
  the write begins); ``storage.checkpoints()`` lists what it holds (``.step``,
  ``.complete``: a write that never finished leaves an incomplete checkpoint);
  ``storage.read(step)`` returns a complete checkpoint as a ``HostCopy``.

Every costed operation also has an ``_async`` twin to ``await``
(``train_step_async``, ``snapshot_async``, ``restore_async``, ``write_async``,
``read_async``): same cost, but other tasks run meanwhile. The plain forms block
everything.

Storage may hold checkpoints from an earlier run that crashed: training resumes from
the newest complete one and runs up to ``num_steps``. Every checkpoint written holds
the weights and optimizer state of the same step, and the checkpoint of the last step
is complete when ``train()`` returns.
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    def resume(self):
        """Restore the newest complete checkpoint, if any; return its step (0: none)."""
        complete = [c.step for c in self.storage.checkpoints() if c.complete]
        if not complete:
            return 0
        step = max(complete)
        self.model.restore(self.storage.read(step))
        return step

    def train(self):
        start = self.resume()
        for step in range(start, self.config.num_steps):
            self.model.train_step(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                # Training waits while the checkpoint is written.
                self.storage.write(self.model.snapshot())
