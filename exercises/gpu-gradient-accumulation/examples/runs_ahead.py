"""Never waits for validation: polls query() and trains on, far past the stopping epoch.

expect: wrong
failing: wasted_work
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
            self.best = torch.full((), float("inf"), device=self.device)
            self.bad = torch.zeros((), dtype=torch.int64, device=self.device)
        self.snapshots = {}
        self.pending = []
        self.losses = {}

    def train_epoch(self, epoch):
        steps = self.config.accumulation_steps
        for i, (inputs, targets) in enumerate(self.job.batches(epoch)):
            (self.job.loss(self.model(inputs), targets) / steps).backward()
            if (i + 1) % steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def launch_validation(self, epoch, snapshot):
        self.val_stream.wait_stream(self.train_stream)
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
        self.pending.append((epoch, done, report))

    def collect(self, wait=False):
        """The epoch at which a finished validation says to stop, or None."""
        while self.pending and (wait or self.pending[0][1].query()):
            epoch, done, report = self.pending.pop(0)
            done.synchronize()
            loss, stop = report.tolist()
            self.losses[epoch] = loss
            if stop > 0:
                return epoch
        return None

    def train(self):
        stop_epoch = None
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            self.snapshots[epoch] = [p.detach().clone() for p in self.model.parameters()]
            self.launch_validation(epoch, self.snapshots[epoch])
            stop_epoch = self.collect()
            if stop_epoch is not None:
                break
        if stop_epoch is None:
            stop_epoch = self.collect(wait=True)
        if stop_epoch is None:
            stop_epoch = self.config.max_epochs - 1
        return {
            "stop_epoch": stop_epoch,
            "weights": self.snapshots[stop_epoch],
            "losses": [self.losses[e] for e in range(stop_epoch + 1)],
        }
