"""Reads from the question banks."""

from django.db.models import Count, Q, QuerySet

from qa.models import Question, QuestionBank
from qa.search import search


def bank_list() -> QuerySet[QuestionBank]:
    return QuestionBank.objects.annotate(
        question_count=Count("questions", filter=Q(questions__retired=False))
    )


def question_search(*, query: str = "", bank: str = "", topic: str = "") -> QuerySet[Question]:
    """Live questions matching every word of `query` (the database's full-text search,
    qa/search.py), best first; in bank order when there is no query."""
    questions = Question.objects.filter(retired=False).select_related("bank")
    if bank:
        questions = questions.filter(bank__slug=bank)
    if topic:
        questions = questions.filter(topic=topic)
    questions = questions.order_by("bank__title", "kind", "position")
    return search(questions, query)


def bank_topics(bank: QuestionBank) -> list[str]:
    topics = bank.questions.filter(retired=False).order_by("kind", "position")
    return list(dict.fromkeys(topics.values_list("topic", flat=True)))
