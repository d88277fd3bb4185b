"""Validates a temporary snapshot and drops it without record_stream: its memory is reused.

expect: wrong
failing: validation
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
        self.checkpoints = {}
        self.pending = {}
        self.losses = {}

    def train_epoch(self, epoch):
        steps = self.config.accumulation_steps
        for i, (inputs, targets) in enumerate(self.job.batches(epoch)):
            (self.job.loss(self.model(inputs), targets) / steps).backward()
            if (i + 1) % steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def launch_validation(self, epoch):
        snapshot = [p.detach().clone() for p in self.model.parameters()]
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
        self.pending[epoch] = (done, report)
        # Returning drops `snapshot`: the allocator hands its memory to the training
        # stream's next allocations while validation may still be reading it.

    def finish_validation(self, epoch):
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
            self.checkpoints[epoch] = [p.detach().clone() for p in self.model.parameters()]
            if epoch > 0 and self.finish_validation(epoch - 1):
                stop_epoch = epoch - 1
                break
            self.launch_validation(epoch)
        else:
            self.finish_validation(last)
        return {
            "stop_epoch": stop_epoch,
            "weights": self.checkpoints[stop_epoch],
            "losses": [self.losses[e] for e in range(stop_epoch + 1)],
        }
