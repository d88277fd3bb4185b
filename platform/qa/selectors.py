"""Reads from the question banks."""

from django.db.models import Count, Q, QuerySet

from qa.models import Question, QuestionBank

SEARCH_FIELDS = ("text", "answer", "topic", "scenario", "root_cause")


def bank_list() -> QuerySet[QuestionBank]:
    return QuestionBank.objects.annotate(
        question_count=Count("questions", filter=Q(questions__retired=False))
    )


def question_search(*, query: str = "", bank: str = "", topic: str = "") -> QuerySet[Question]:
    """Live questions whose text matches every word of `query` (any field, any case)."""
    questions = Question.objects.filter(retired=False).select_related("bank")
    if bank:
        questions = questions.filter(bank__slug=bank)
    if topic:
        questions = questions.filter(topic=topic)
    for word in query.split()[:8]:
        match = Q()
        for name in SEARCH_FIELDS:
            match |= Q(**{f"{name}__icontains": word})
        questions = questions.filter(match)
    return questions.order_by("bank__title", "kind", "position")


def bank_topics(bank: QuestionBank) -> list[str]:
    topics = bank.questions.filter(retired=False).order_by("kind", "position")
    return list(dict.fromkeys(topics.values_list("topic", flat=True)))
