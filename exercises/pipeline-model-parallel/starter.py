"""Model-parallel training, one micro-batch at a time (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and compares each stage's accumulated gradient, and what ran when, with this
starter's run.

``cluster`` (from ``runner.sim``) holds:

- ``cluster.config``: ``num_stages``, ``num_microbatches``, ``max_in_flight`` (how
  many micro-batches may be between their first forward and their last backward
  at once: activation memory is limited) and the simulated costs, in seconds;
- ``cluster.stages``: one ``Stage`` per layer, each on its own node.
  ``stage.forward(mb_id, x)`` returns the layer's output and keeps the activation
  for the backward pass; ``stage.backward(mb_id, grad)`` uses and frees it, adds
  the weight gradient into the stage, and returns the gradient for the stage
  before. A node runs one operation at a time;
- ``cluster.links``: ``links[k]`` joins stage ``k`` and ``k + 1``;
  ``link.send(tensor, mb_id)`` carries a tensor across (either way) and returns it;
- ``cluster.microbatches``: ``mb.id``, ``mb.inputs``, and
  ``mb.loss_gradient(outputs)`` (free) to start the backward pass.

Every operation has an ``_async`` twin to ``await`` (``forward_async``,
``backward_async``, ``send_async``): same cost, but other tasks run meanwhile.
The plain forms block everything.

``train()`` runs the forward and backward pass of every micro-batch once.
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.stages = cluster.stages
        self.links = cluster.links
        self.microbatches = cluster.microbatches

    def run_microbatch(self, mb):
        x = mb.inputs
        for k, stage in enumerate(self.stages):
            x = stage.forward(mb.id, x)
            if k < len(self.links):
                x = self.links[k].send(x, mb.id)
        grad = mb.loss_gradient(x)
        for k in reversed(range(len(self.stages))):
            grad = self.stages[k].backward(mb.id, grad)
            if k > 0:
                grad = self.links[k - 1].send(grad, mb.id)

    def train(self):
        for mb in self.microbatches:
            self.run_microbatch(mb)
