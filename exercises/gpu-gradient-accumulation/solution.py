"""Reference solution: validation on a snapshot, on its own CUDA stream, overlapped.

- At the end of an epoch the training stream copies the weights into a snapshot.
- The validation stream first waits for the training stream (``wait_stream``), so it
  reads the snapshot only once the copy has run; every snapshot tensor is then marked
  as in use by the validation stream (``record_stream``), so when the host drops it the
  allocator does not hand its memory to training while validation still reads it.
- The early-stopping rule runs on the device, on the validation stream: the best loss
  and the count of epochs without improvement are tensors created on that stream. The
  loss and the stop flag are copied into pinned host memory with ``non_blocking=True``
  and a CUDA event marks when they have arrived.
- The host never waits for the training stream. After queueing epoch e's training it
  waits for the event of epoch e-1's validation, which ran on the GPU alongside epoch
  e's training: training is at most one epoch ahead of validation and stops as soon as
  the flag says so (epoch e is then the one wasted epoch).
"""

import torch


class Trainer:
    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.model = job.model
        self.optimizer = job.optimizer
        self.device = job.device
        self.train_stream = torch.cuda.current_stream(self.device)
        self.val_stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(self.val_stream):
            # Made on the validation stream: only that stream ever uses or frees them.
            self.best = torch.full((), float("inf"), device=self.device)
            self.bad = torch.zeros((), dtype=torch.int64, device=self.device)
        self.snapshots = {}
        self.pending = {}  # epoch -> (event, pinned [loss, stop])
        self.losses = {}

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

    def launch_validation(self, epoch, snapshot):
        self.val_stream.wait_stream(self.train_stream)  # the snapshot copy has run
        report = torch.empty(2, dtype=torch.float64, pin_memory=self.device.type == "cuda")
        with torch.cuda.stream(self.val_stream), torch.no_grad():
            loss = self.job.validate(snapshot)
            improved = loss < self.best - self.config.min_delta
            self.best = torch.where(improved, loss, self.best)
            self.bad = torch.where(improved, torch.zeros_like(self.bad), self.bad + 1)
            stop = self.bad >= self.config.patience
            report.copy_(torch.stack([loss.double(), stop.double()]), non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.val_stream)
        for tensor in snapshot:
            tensor.record_stream(self.val_stream)
        self.pending[epoch] = (done, report)

    def finish_validation(self, epoch):
        """Wait for one validation (already overlapped with training); True to stop."""
        done, report = self.pending.pop(epoch)
        done.synchronize()
        loss, stop = report.tolist()
        self.losses[epoch] = loss
        return stop > 0

    def train(self):
        last = self.config.max_epochs - 1
        stop_epoch = last
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            self.snapshots[epoch] = self.snapshot()
            self.snapshots.pop(epoch - 2, None)  # record_stream keeps this safe
            if epoch > 0 and self.finish_validation(epoch - 1):
                stop_epoch = epoch - 1
                break
            self.launch_validation(epoch, self.snapshots[epoch])
        else:
            self.finish_validation(last)
        return {
            "stop_epoch": stop_epoch,
            "weights": self.snapshots[stop_epoch],
            "losses": [self.losses[e] for e in range(stop_epoch + 1)],
        }
