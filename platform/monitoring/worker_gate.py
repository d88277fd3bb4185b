"""A worker whose sandbox cannot run refuses work instead of failing every run.

``SandboxGate``, a step of the Celery worker's consumer (registered in overlap/celery.py),
checks the worker's sandboxes (``sandbox_report``) once the task consumer exists and
before it consumes anything. When ``health.sandbox_problem`` says this worker cannot
grade (docker named but no engine answers, its image missing or stale, no backend it may
use), it logs one error naming the problem and the fix, and stops consuming the queues
whose jobs need a sandbox (``SANDBOX_QUEUES``; `recovery` stays): their messages wait in
the broker for a worker that can grade, instead of each ending `internal_error` at once.
Its heartbeat says which queues it refuses and why, so ``heartbeat.queue_served`` counts it
out of them (a Run is then refused with a clear message, /healthz says why).

It checks again every 2 s while it refuses, and consumes again,
saying so, once the sandbox works (the image was built, the engine is back); a worker
that could grade checks every SANDBOX_REPORT_EVERY beats and refuses if that changes.
"""

import logging
import threading
from functools import partial

from celery import bootsteps
from django.conf import settings

from monitoring import heartbeat

log = logging.getLogger(__name__)
SANDBOX_QUEUES = ("default", "authoring", "gpu")  # their jobs run in a sandbox
REFUSING_RECHECK_S = 2.0


def refusal(report: dict) -> str | None:
    """Why a worker with this sandbox report cannot grade (None: it can)."""
    from monitoring.health import sandbox_problem

    return sandbox_problem({"sandbox_report": report})


def fix_for(problem: str) -> str:
    if problem.startswith("its sandbox check failed"):
        return "this worker's runner sources must import (make install, same checkout)"
    if "image" in problem:
        return "build it on this worker's Docker engine: make sandbox-image"
    if "sandbox daemon" in problem:
        return ("start the sandbox daemon (compose service sandboxd) and share its socket "
                "with this worker (OVERLAP_SANDBOX_SOCKET; docs/deploy.md)")
    if "Docker engine" in problem:
        return ("start the Docker engine (or give this worker its socket), or set "
                "OVERLAP_SANDBOX to a backend that works here")
    return ("install Docker (then make sandbox-image) or bubblewrap, or set "
            "OVERLAP_SANDBOX to a backend that works here")


class Gate:
    """Whether one worker takes its sandbox queues, decided from sandbox reports; it acts
    through ``cancel(queue)`` and ``add(queue)``."""

    def __init__(self, *, hostname: str, queues: list[str], cancel, add):
        self.hostname, self.queues = hostname, sorted(queues)
        self.cancel, self.add = cancel, add
        self.why: str | None = None  # set while it refuses
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="overlap-sandbox-gate",
                                        daemon=True)

    @property
    def refusing(self) -> dict:
        return {"queues": self.queues, "why": self.why} if self.why else {}

    def check(self, report: dict | None = None) -> str | None:
        """Refuse or take work after this sandbox report (a fresh one by default);
        returns why it refuses (None: it takes its queues)."""
        if report is None:
            from monitoring.sandbox_report import sandbox_report

            report = sandbox_report()
        was, why = self.why, refusal(report)
        self.why = why
        if why and why != was:
            log.error("sandbox unusable: %s; fix: %s. Worker %s refuses work (not consuming "
                      "%s) until it can grade; checking again every %s s.", why,
                      fix_for(why), self.hostname, ", ".join(self.queues),
                      min(settings.OVERLAP_HEARTBEAT_SECONDS, REFUSING_RECHECK_S))
        if why and not was:
            for queue in self.queues:
                self.cancel(queue)
        elif was and not why:
            log.warning("sandbox usable again (%s): worker %s consumes %s again",
                        report.get("chosen"), self.hostname, ", ".join(self.queues))
            for queue in self.queues:
                self.add(queue)
        heartbeat.gate_decided(self.hostname, queues=self.queues, refusing=self.refusing,
                               report=report, beat_now=why != was)
        return why

    def start(self) -> "Gate":
        self._thread.start()
        return self

    def _run(self) -> None:
        beats = 0
        while True:
            # While it refuses, it looks again every few seconds (a sandbox daemon that
            # restarts with the worker is back in a second or two).
            wait = settings.OVERLAP_HEARTBEAT_SECONDS
            if self.why:
                wait = min(wait, REFUSING_RECHECK_S)
            if self._stop.wait(wait):
                return
            beats += 1
            if self.why or beats % heartbeat.SANDBOX_REPORT_EVERY == 0:
                try:
                    self.check()
                except Exception as exc:  # keep the last decision; try again next beat
                    log.warning("sandbox gate: the check failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        # Its thread may be in a check: let it end, or that check's decision would be
        # recorded after this gate is gone (and a later worker of the same name get it).
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=15)
        heartbeat.gate_gone(self.hostname)


class SandboxGate(bootsteps.StartStopStep):
    """The consumer step: decides before the first message is consumed (in the
    consumer's thread), then lets the gate's thread re-check, acting through the
    consumer's loop (``call_soon``, as the remote-control commands do)."""

    label = "Sandbox gate"
    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, c, **kwargs):
        self.gate: Gate | None = None
        super().__init__(c, **kwargs)

    def start(self, c) -> None:
        queues = [q for q in c.app.amqp.queues.consume_from if q in SANDBOX_QUEUES]
        if not queues:
            return
        self.gate = Gate(hostname=c.hostname, queues=queues, cancel=c.cancel_task_queue,
                         add=c.add_task_queue)
        try:
            self.gate.check()
        except Exception as exc:  # a broken check must not stop the worker
            log.warning("sandbox gate: the check failed: %s", exc)
        self.gate.cancel = partial(c.call_soon, c.cancel_task_queue)
        self.gate.add = partial(c.call_soon, c.add_task_queue)
        self.gate.start()

    def stop(self, c) -> None:
        """Also on a reconnection: the app's queue selection is restored, so the next
        start (or the next worker in this process) begins from the configured queues."""
        gate, self.gate = self.gate, None
        if gate is None:
            return
        gate.stop()
        queues = c.app.amqp.queues
        for name in gate.queues:
            if name in queues:
                queues.select_add(queues[name])

    shutdown = stop
