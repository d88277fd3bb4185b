"""Exercises and their immutable versions.

An Exercise is the stable identity (its slug); each change of its folder is stored as a
new ExerciseVersion, and older versions stay for the sessions that used them.
"""

from django.db import models


class Tag(models.Model):
    slug = models.SlugField(unique=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Exercise(models.Model):
    DIFFICULTIES = [("easy", "Easy"), ("medium", "Medium"), ("hard", "Hard")]
    TRACKS = [("simulated", "Simulated"), ("gpu", "GPU")]

    slug = models.SlugField(unique=True)
    # Copied from the current version, for listing and filtering.
    title = models.CharField(max_length=200)
    summary = models.TextField()
    difficulty = models.CharField(max_length=10, choices=DIFFICULTIES)
    time_minutes = models.PositiveSmallIntegerField()
    track = models.CharField(max_length=10, choices=TRACKS, default="simulated")
    tags = models.ManyToManyField(Tag, related_name="exercises", blank=True)
    current_version = models.ForeignKey(
        "ExerciseVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class ExerciseVersion(models.Model):
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    title = models.CharField(max_length=200)
    summary = models.TextField()
    difficulty = models.CharField(max_length=10, choices=Exercise.DIFFICULTIES)
    time_minutes = models.PositiveSmallIntegerField()
    track = models.CharField(max_length=10, choices=Exercise.TRACKS)
    tags = models.JSONField(default=list)
    prompt = models.TextField(help_text="Candidate-facing Markdown")
    guide = models.JSONField(help_text="Interviewer guide (guide.yaml), validated")
    # Every other file of the folder (starter.py, solution.py, grader.py, examples/…),
    # path -> text, so a session can always run the exact version it started with.
    files = models.JSONField(default=dict)

    class Meta:
        ordering = ["exercise", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["exercise", "number"], name="unique_version_number")
        ]

    def __str__(self) -> str:
        return f"{self.exercise.slug} v{self.number}"
