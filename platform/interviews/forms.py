from datetime import datetime
from html import unescape
from zoneinfo import ZoneInfo, available_timezones

from django import forms
from django.utils.html import strip_tags

from catalog.models import Exercise
from content.markdown import render_markdown
from qa.models import Question


def question_label(question: Question) -> str:
    """What a question is called in a list: its text as read (Markdown rendered, then as
    plain text), a production challenge's title said to be one."""
    text = unescape(strip_tags(render_markdown(question.text))).strip()
    return f"Production challenge: {text}" if question.kind == Question.CHALLENGE else text


class SessionForm(forms.Form):
    exercise = forms.ModelChoiceField(
        queryset=Exercise.objects.exclude(current_version=None), empty_label=None
    )
    candidate_name = forms.CharField(max_length=200)
    candidate_email = forms.EmailField()
    questions = forms.ModelMultipleChoiceField(
        queryset=Question.objects.filter(retired=False).select_related("bank")
        .order_by("bank__title", "kind", "position"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Optional Q&A questions to ask after the exercise.",
    )

    scheduled_at = forms.DateTimeField(
        required=False, label="Planned start",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
        help_text="In the time zone below; the candidate sees it in theirs too.")
    time_zone = forms.ChoiceField(initial="UTC", label="Time zone", required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = [(z, z) for z in sorted(available_timezones())]
        from monitoring.heartbeat import queue_served

        self.gpu_online = queue_served("gpu")
        self.fields["exercise"].label_from_instance = self._exercise_label
        self.fields["questions"].label_from_instance = question_label

    @property
    def gpu_exercises_unservable(self) -> list[str]:
        """The GPU exercises' titles while no GPU worker is online (none can be picked)."""
        if self.gpu_online:
            return []
        return [e.title for e in self.fields["exercise"].queryset if e.track == "gpu"]

    @property
    def question_groups(self) -> list[tuple[str, list]]:
        """The question checkboxes by bank: [(bank title, [checkbox, ...]), ...]."""
        groups: dict[str, list] = {}
        for choice in self["questions"]:
            groups.setdefault(choice.data["value"].instance.bank.title, []).append(choice)
        return list(groups.items())

    def _exercise_label(self, exercise) -> str:
        if exercise.track == "gpu" and not self.gpu_online:
            return f"{exercise.title} (GPU: no GPU worker online, runs cannot be graded)"
        return exercise.title

    def clean(self):
        data = super().clean()
        exercise = data.get("exercise")
        if exercise is not None and exercise.track == "gpu" and not self.gpu_online:
            self.add_error("exercise", (
                f"{exercise.title} runs on a GPU, and no GPU worker is online: the "
                "candidate's runs could not be graded. Start a GPU worker (runner/README.md, "
                "\"GPU\") or choose another exercise."))
        data["time_zone"] = zone = data.get("time_zone") or "UTC"
        when = data.get("scheduled_at")
        if isinstance(when, datetime) and zone:
            # The browser sends a wall-clock time; it means that time in the chosen zone.
            data["scheduled_at"] = when.replace(tzinfo=None).replace(tzinfo=ZoneInfo(zone))
        return data
