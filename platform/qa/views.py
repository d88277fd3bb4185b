from django.shortcuts import get_object_or_404, render

from qa import selectors
from qa.models import QuestionBank


def _search_context(request, bank_slug: str = "") -> dict:
    query = request.GET.get("q", "").strip()
    topic = request.GET.get("topic", "")
    return {
        "query": query,
        "topic": topic,
        "questions": selectors.question_search(query=query, bank=bank_slug, topic=topic),
    }


def bank_list(request):
    context = {"banks": selectors.bank_list(), "show_bank": True, **_search_context(request)}
    return render(request, "qa/bank_list.html", context)


def question_search(request):
    """The live-search results (an htmx partial), across banks or within one."""
    bank = request.GET.get("bank", "")
    context = {"show_bank": not bank, **_search_context(request, bank)}
    return render(request, "qa/_results.html", context)


def bank_detail(request, slug):
    bank = get_object_or_404(QuestionBank, slug=slug)
    context = {
        "bank": bank,
        "topics": selectors.bank_topics(bank),
        "checklist": bank.checklist.all(),
        "show_bank": False,
        **_search_context(request, bank.slug),
    }
    return render(request, "qa/bank_detail.html", context)
