"""Authoring: drafts that authors edit, their validations, and what got published.

A draft is the mutable working copy of one exercise. It keeps exactly what the author
typed, valid or not, so nothing is ever lost to a validation error. Publishing turns a
valid, validated draft into a new immutable ExerciseVersion (catalog), through the same
reader and store as `sync_content`.
"""

from django.conf import settings
from django.db import models


class ExerciseDraft(models.Model):
    slug = models.SlugField(unique=True)
    exercise = models.ForeignKey(
        "catalog.Exercise", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The version this draft started from (or last published): "unpublished changes" are
    # measured against it.
    based_on = models.ForeignKey(
        "catalog.ExerciseVersion", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    # As typed (possibly invalid): the exercise.yaml mapping, prompt.md, the guide.yaml
    # mapping, and the code side (path -> text).
    meta = models.JSONField(default=dict)
    prompt = models.TextField(blank=True)
    guide = models.JSONField(default=dict)
    files = models.JSONField(default=dict)
    # Bumped on every save: a save based on an older revision is refused, never merged
    # over someone else's work.
    revision = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return f"draft {self.slug}"

    @property
    def title(self) -> str:
        title = self.meta.get("title") if isinstance(self.meta, dict) else None
        return str(title) if title else self.slug

    @property
    def track(self) -> str:
        return "gpu" if isinstance(self.meta, dict) and self.meta.get("track") == "gpu" \
            else "simulated"


class Validation(models.Model):
    """One run of the exercise's own checks (what `python -m runner validate` does) on the
    exact files of a draft at the time it was asked for."""

    QUEUED, RUNNING, DONE, INTERNAL_ERROR = "queued", "running", "done", "internal_error"
    STATUSES = [
        (QUEUED, "Queued"),
        (RUNNING, "Running"),
        (DONE, "Done"),
        (INTERNAL_ERROR, "Internal error"),
    ]
    ACTIVE = (QUEUED, RUNNING)

    draft = models.ForeignKey(ExerciseDraft, on_delete=models.CASCADE, related_name="validations")
    # Hash of the whole exported folder (as content_sync computes it): publishing needs a
    # passed validation with the draft's current hash.
    content_hash = models.CharField(max_length=64)
    files = models.JSONField(help_text="The code side that was validated, path -> text")
    queue = models.CharField(max_length=16, default="default")
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED)
    passed = models.BooleanField(null=True)
    message = models.TextField(blank=True)
    error = models.TextField(blank=True, help_text="Platform-side failure, for operators")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_enqueued_at = models.DateTimeField(null=True, blank=True)  # overlap/jobs.py

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "updated_at"])]

    def __str__(self) -> str:
        return f"validation {self.pk} of {self.draft.slug} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class ValidationPart(models.Model):
    """One file graded in the sandbox: the solution, the starter, or an example."""

    PENDING, RUNNING, DONE, SKIPPED = "pending", "running", "done", "skipped"
    STATUSES = [(PENDING, "Pending"), (RUNNING, "Running"), (DONE, "Done"), (SKIPPED, "Skipped")]

    validation = models.ForeignKey(Validation, on_delete=models.CASCADE, related_name="parts")
    position = models.PositiveSmallIntegerField()
    file = models.CharField(max_length=200)
    expected = models.CharField(max_length=32)
    expected_failing = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=STATUSES, default=PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    verdict = models.CharField(max_length=64, blank=True)
    failing = models.JSONField(default=list)
    speedup = models.FloatField(null=True, blank=True)
    target_speedup = models.FloatField(null=True, blank=True)
    message = models.TextField(blank=True)
    checks = models.JSONField(default=list)
    ok = models.BooleanField(null=True)
    problem = models.TextField(blank=True)
    backend = models.CharField(max_length=16, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # overlap/jobs.py
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["validation", "position"]
        constraints = [
            models.UniqueConstraint(fields=["validation", "position"], name="unique_part_position")
        ]

    def __str__(self) -> str:
        return f"{self.file} ({self.status})"


class Publication(models.Model):
    """Who published a version from the browser, and the validation that allowed it.
    (Versions loaded by `sync_content` have none.)"""

    version = models.OneToOneField(
        "catalog.ExerciseVersion", on_delete=models.CASCADE, related_name="publication"
    )
    validation = models.ForeignKey(
        Validation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.version} published"
