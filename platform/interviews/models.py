"""A live interview: one candidate, one pinned exercise version, one interviewer."""

import secrets

from django.conf import settings
from django.db import models


def new_token() -> str:
    return secrets.token_urlsafe(32)


class InterviewSession(models.Model):
    SCHEDULED, LIVE, ENDED = "scheduled", "live", "ended"
    STATES = [(SCHEDULED, "Scheduled"), (LIVE, "Live"), (ENDED, "Ended")]
    PHASES = [
        ("introduction", "Introduction"),
        ("coding", "Coding"),
        ("walkthrough", "Walkthrough"),
        ("followups", "Follow-ups"),
    ]
    RECOMMENDATIONS = [
        ("strong_no", "Strong no hire"),
        ("no", "No hire"),
        ("yes", "Hire"),
        ("strong_yes", "Strong hire"),
    ]

    exercise_version = models.ForeignKey(
        "catalog.ExerciseVersion", on_delete=models.PROTECT, related_name="sessions"
    )
    interviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="interview_sessions"
    )
    candidate_name = models.CharField(max_length=200)
    candidate_email = models.EmailField()
    token = models.CharField(max_length=64, unique=True, default=new_token, editable=False)
    state = models.CharField(max_length=10, choices=STATES, default=SCHEDULED)
    phase = models.CharField(max_length=12, choices=PHASES, default="introduction")
    phase_started_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    notes = models.TextField(blank=True, help_text="Private to interviewers")
    recommendation = models.CharField(max_length=12, choices=RECOMMENDATIONS, blank=True)
    # Logistics: when the interview is planned, in the interviewer's time zone.
    scheduled_at = models.DateTimeField(null=True, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC")
    invited_at = models.DateTimeField(null=True, blank=True)
    # The shared pad: the server is the authority. `pad_base` is the text at version 0;
    # every accepted change is a PadUpdate, so the text at any version can be rebuilt.
    pad_base = models.TextField(blank=True)
    pad_text = models.TextField(blank=True)
    pad_version = models.PositiveIntegerField(default=0)
    pad_candidate_bytes = models.PositiveIntegerField(
        default=0, help_text="stored by the candidate's updates and saves (the quota)")
    interviewer_readonly = models.BooleanField(
        default=False, help_text="The interviewer watches but cannot type in the pad")
    # The candidate's clock (time left of the allocation): the interviewer can add time
    # and pause it. Paused time does not count; `time_paused_at` is set while paused.
    time_extra_seconds = models.IntegerField(default=0)
    time_paused_seconds = models.PositiveIntegerField(default=0)
    time_paused_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.candidate_name} · {self.exercise_version}"

    @property
    def is_live(self) -> bool:
        return self.state == self.LIVE

    @property
    def is_ended(self) -> bool:
        return self.state == self.ENDED


class SessionQuestion(models.Model):
    """A Q&A bank question the interviewer planned to ask in this session."""

    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="bank_questions")
    question = models.ForeignKey("qa.Question", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "question"], name="unique_session_question")
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: question {self.question_id}"


class CodeRevision(models.Model):
    """Every saved state of the candidate's code, in order: autosave and the replay."""

    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="revisions")
    number = models.PositiveIntegerField()
    code = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "number"]
        constraints = [
            models.UniqueConstraint(fields=["session", "number"], name="unique_revision_number")
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: revision {self.number}"


class HintReveal(models.Model):
    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="hint_reveals")
    index = models.PositiveSmallIntegerField(help_text="0-based position in the guide's hints")
    revealed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                    related_name="+")
    revealed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="unique_hint_reveal")
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: hint {self.index + 1}"


class Score(models.Model):
    """A score with a note: a rubric criterion, a follow-up, or a bank question."""

    RUBRIC, FOLLOWUP, QUESTION = "rubric", "followup", "question"
    KINDS = [(RUBRIC, "Rubric criterion"), (FOLLOWUP, "Follow-up"), (QUESTION, "Bank question")]

    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="scores")
    kind = models.CharField(max_length=10, choices=KINDS)
    key = models.CharField(max_length=80, help_text="criterion key, follow-up index, question id")
    score = models.SmallIntegerField(null=True, blank=True)
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "key"]
        constraints = [
            models.UniqueConstraint(fields=["session", "kind", "key"], name="unique_score")
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.kind} {self.key} = {self.score}"


class PadUpdate(models.Model):
    """One accepted change of the shared pad (a keystroke, a paste…), in order.

    `changes` is CodeMirror's ChangeSet JSON (retain counts and [deleted, ...inserted
    lines]), a few bytes for a keystroke; with `version` it rebuilds the text at any point.
    """

    CANDIDATE, INTERVIEWER = "candidate", "interviewer"
    ROLES = [(CANDIDATE, "Candidate"), (INTERVIEWER, "Interviewer")]

    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="pad_updates")
    version = models.PositiveIntegerField(help_text="the pad version this update produced")
    client_id = models.CharField(max_length=40)
    role = models.CharField(max_length=12, choices=ROLES)
    author = models.CharField(max_length=200)
    changes = models.JSONField()
    size = models.PositiveIntegerField(default=0, help_text="bytes stored, for the quota")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["session", "version"]
        constraints = [
            models.UniqueConstraint(fields=["session", "version"], name="unique_pad_version")
        ]
        indexes = [models.Index(fields=["session", "role", "created_at"])]

    def __str__(self) -> str:
        return f"{self.session_id}: pad v{self.version} by {self.author}"


class ChatMessage(models.Model):
    """Chat between interviewer and candidate: both sides see it; it is in the scorecard."""

    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="chat_messages")
    role = models.CharField(max_length=12, choices=PadUpdate.ROLES)
    author = models.CharField(max_length=200)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.author}: {self.text[:40]}"


class IntegrityEvent(models.Model):
    """A signal from the candidate's browser the interviewer may want to ask about: a paste
    into the editor (its size, and whether the text came from outside the pad) or the
    candidate leaving the page (another tab or window) and for how long.

    Ordered and timed by the server (`created_at`, `returned_at`): nothing the browser
    claims about time is stored. The candidate is told these are recorded.
    """

    PASTE, AWAY = "paste", "away"
    KINDS = [(PASTE, "Paste"), (AWAY, "Left the page")]
    PAD, TASK, OUTSIDE = "pad", "task", "outside"
    SOURCES = [(PAD, "from the pad"), (TASK, "from the task text"),
               (OUTSIDE, "from outside the pad")]
    BLUR, HIDDEN = "blur", "hidden"
    REASONS = [(BLUR, "another window had the focus"), (HIDDEN, "the tab was hidden")]

    session = models.ForeignKey(InterviewSession, on_delete=models.CASCADE,
                                related_name="integrity_events")
    kind = models.CharField(max_length=8, choices=KINDS)
    chars = models.PositiveIntegerField(null=True, blank=True, help_text="a paste's length")
    source = models.CharField(max_length=8, choices=SOURCES, blank=True)
    reason = models.CharField(max_length=8, choices=REASONS, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    returned_at = models.DateTimeField(null=True, blank=True,
                                       help_text="when the candidate came back (away)")

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.kind} at {self.created_at:%H:%M:%S}"

    @property
    def away_seconds(self) -> float | None:
        if self.kind != self.AWAY or self.returned_at is None:
            return None
        return max(0.0, (self.returned_at - self.created_at).total_seconds())

    @property
    def is_external(self) -> bool:
        return self.kind == self.PASTE and self.source != self.PAD
