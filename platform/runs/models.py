"""A run: candidate code graded in a sandbox. Lifecycle status is kept apart from verdict."""

from django.db import models

from runner.contract import LABELS, Verdict

# Every verdict the engine or the sandbox can give, labelled: one contract for both sides.
VERDICT_CHOICES = [(verdict.value, LABELS[verdict]) for verdict in Verdict]


class Run(models.Model):
    QUEUED, RUNNING, DONE, INTERNAL_ERROR = "queued", "running", "done", "internal_error"
    STATUSES = [
        (QUEUED, "Queued"),
        (RUNNING, "Running"),
        (DONE, "Done"),
        (INTERNAL_ERROR, "Internal error"),
    ]
    ACTIVE = (QUEUED, RUNNING)

    session = models.ForeignKey("interviews.InterviewSession", null=True, blank=True,
                                on_delete=models.CASCADE, related_name="runs")
    exercise_version = models.ForeignKey("catalog.ExerciseVersion", on_delete=models.PROTECT,
                                         related_name="runs")
    code = models.TextField()
    requested_by = models.CharField(max_length=20, default="candidate")
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED)
    verdict = models.CharField(max_length=32, blank=True, choices=VERDICT_CHOICES)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Platform-side failure, for operators")
    backend = models.CharField(max_length=16, blank=True)
    queue = models.CharField(max_length=16, default="default")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # The job lifecycle (overlap/jobs.py): when the last message was sent, and the running
    # worker's last sign of life.
    last_enqueued_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The process grading it ("<host>|<pid>:<start ticks>"): a worker process that dies is
    # seen at once on its host, without waiting for its heartbeat to go stale.
    worker = models.CharField(max_length=200, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status}{', ' + self.verdict if self.verdict else ''})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def metrics(self) -> dict:
        return (self.result or {}).get("metrics") or {}
