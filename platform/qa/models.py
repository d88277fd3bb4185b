"""Q&A question banks: questions with good answers, production challenges, checklists."""

from django.db import models


class QuestionBank(models.Model):
    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField()
    content_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class Question(models.Model):
    QUESTION, CHALLENGE = "question", "challenge"
    KINDS = [(QUESTION, "Question"), (CHALLENGE, "Production challenge")]

    bank = models.ForeignKey(QuestionBank, on_delete=models.CASCADE, related_name="questions")
    key = models.SlugField()
    kind = models.CharField(max_length=10, choices=KINDS, default=QUESTION)
    position = models.PositiveIntegerField(default=0)
    topic = models.CharField(max_length=120)
    tags = models.JSONField(default=list)
    # A question's text, or a challenge's title.
    text = models.TextField()
    # The good answer, or a challenge's solution.
    answer = models.TextField()
    scenario = models.TextField(blank=True)
    root_cause = models.TextField(blank=True)
    # Removed from its file: hidden from browsing, kept for sessions that asked it.
    retired = models.BooleanField(default=False)

    class Meta:
        ordering = ["bank", "kind", "position"]
        constraints = [
            models.UniqueConstraint(fields=["bank", "key"], name="unique_question_key")
        ]

    def __str__(self) -> str:
        return f"{self.bank.slug}/{self.key}"


class ChecklistItem(models.Model):
    bank = models.ForeignKey(QuestionBank, on_delete=models.CASCADE, related_name="checklist")
    position = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    advice = models.TextField()

    class Meta:
        ordering = ["bank", "position"]

    def __str__(self) -> str:
        return self.title
