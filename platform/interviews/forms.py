from django import forms

from catalog.models import Exercise
from qa.models import Question


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
