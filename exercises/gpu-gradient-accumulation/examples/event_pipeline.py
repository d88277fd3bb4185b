"""A second correct design: events instead of wait_stream, the patience rule on the host.

expect: accepted
"""

import math

import torch


class Trainer:
    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.model = job.model
        self.optimizer = job.optimizer
        self.device = job.device
        # A high-priority stream: its small kernels get the next free SMs.
        self.val_stream = torch.cuda.Stream(self.device, priority=-1)
        self.in_flight = None  # (epoch, snapshot, event, pinned loss)
        self.snapshot_of = {}
        self.best = math.inf
        self.bad = 0
        self.losses = []

    def train_epoch(self, epoch):
        steps = self.config.accumulation_steps
        for i, (inputs, targets) in enumerate(self.job.batches(epoch)):
            (self.job.loss(self.model(inputs), targets) / steps).backward()
            if (i + 1) % steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def start_validation(self, epoch):
        snapshot = [p.detach().clone() for p in self.model.parameters()]
        ready = torch.cuda.Event()
        ready.record()  # on the training stream, after the copy
        self.val_stream.wait_event(ready)
        loss_host = torch.empty((), pin_memory=self.device.type == "cuda")
        with torch.cuda.stream(self.val_stream):
            loss = self.job.validate(snapshot)
            loss_host.copy_(loss, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        for tensor in snapshot:
            tensor.record_stream(self.val_stream)
        self.in_flight = (epoch, snapshot, done, loss_host)

    def end_validation(self):
        """Apply the patience rule to the validation in flight; True to stop."""
        epoch, snapshot, done, loss_host = self.in_flight
        self.in_flight = None
        done.synchronize()
        loss = float(loss_host)
        self.losses.append(loss)
        self.snapshot_of = {epoch: snapshot}
        if loss < self.best - self.config.min_delta:
            self.best, self.bad = loss, 0
        else:
            self.bad += 1
        return self.bad >= self.config.patience

    def train(self):
        stop_epoch = None
        for epoch in range(self.config.max_epochs):
            self.train_epoch(epoch)
            if self.in_flight is not None and self.end_validation():
                stop_epoch = epoch - 1
                break
            self.start_validation(epoch)
        if stop_epoch is None:
            self.end_validation()
            stop_epoch = self.config.max_epochs - 1
        return {
            "stop_epoch": stop_epoch,
            "weights": self.snapshot_of[stop_epoch],
            "losses": self.losses,
        }
