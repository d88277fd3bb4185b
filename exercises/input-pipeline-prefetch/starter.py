"""Training with an input pipeline and early stopping (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and checks which batches the model trained on, in what order, what was in memory,
and what ran when.

``cluster`` (from ``runner.sim``) holds:

- ``cluster.config``: ``num_batches``, ``num_loaders``, ``max_prefetched`` (M),
  ``validate_every`` and the simulated cost of each operation, in seconds: a load is a
  read from storage (``read_cost``; now and then a read straggles and takes
  ``slow_read_cost``, and nobody knows in advance which) followed by decoding and
  augmentation (``augment_cost``); ``train_cost``, ``validate_cost``;
- ``cluster.dataset.num_batches``: the batches are numbered 0 to ``num_batches - 1``;
- ``cluster.loaders``: ``num_loaders`` loaders; ``loader.load(index)`` reads and
  augments batch ``index`` and returns it (``batch.index``, ``batch.id``); a loader
  loads one batch at a time;
- ``cluster.model``: ``model.train_step(batch)`` trains on one batch; ``model.version``
  counts the steps taken; the model trains one batch at a time;
- ``cluster.validator``: ``validator.validate(model)`` returns the validation loss of
  the model as it is (it must not train meanwhile).

Every operation also has an ``_async`` twin to ``await`` (``load_async``,
``train_step_async``, ``validate_async``): same cost, but other tasks run meanwhile,
and an awaited load can be cancelled. The plain forms block everything.

Rules:

- the model trains on the batches in dataset order (0, 1, 2, ...), each exactly once;
- memory: a batch takes host memory from the moment its load starts until the model
  takes it (``train_step``) or its load is cancelled; at most ``max_prefetched`` batches
  may be in memory at any moment;
- after every ``validate_every`` steps, validate; stop as soon as a validation loss is
  no better than the best so far (early stopping), or at the end of the data. Nothing
  may be trained after the stop, and no load may still be running when ``train()``
  returns.

``train()`` returns the number of batches trained.
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.dataset = cluster.dataset
        self.loaders = cluster.loaders
        self.model = cluster.model
        self.validator = cluster.validator

    def should_stop(self, loss):
        """Early stopping: stop once a validation loss no longer improves on the best."""
        if loss >= self.best:
            return True
        self.best = loss
        return False

    def train(self):
        self.best = float("inf")
        loader = self.loaders[0]  # the other loaders stay idle
        trained = 0
        for index in range(self.dataset.num_batches):
            batch = loader.load(index)
            self.model.train_step(batch)
            trained += 1
            if trained % self.config.validate_every == 0:
                loss = self.validator.validate(self.model)
                if self.should_stop(loss):
                    break
        return trained
