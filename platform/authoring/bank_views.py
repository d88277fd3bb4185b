"""The authoring area: question banks (questions and production challenges)."""

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from authoring import selectors, services
from authoring.permissions import author_required
from qa.models import Question, QuestionBank
from qa.selectors import bank_list as banks_with_counts


@author_required
def bank_list(request):
    return render(request, "authoring/banks/bank_list.html", {"banks": banks_with_counts()})


@author_required
def bank_new(request):
    context = {"values": {"slug": "", "title": "", "description": ""}}
    if request.method == "POST":
        values = {k: request.POST.get(k, "") for k in ("slug", "title", "description")}
        try:
            bank = services.bank_save(**values)
        except services.Refused as exc:
            context = {"values": values, "problems": exc.problems}
        else:
            messages.success(request, f"Created the bank {bank.title}. Add its questions.")
            return redirect("authoring:bank_detail", slug=bank.slug)
    return render(request, "authoring/banks/bank_form.html", context)


@author_required
def bank_detail(request, slug):
    bank = get_object_or_404(QuestionBank, slug=slug)
    context = {"bank": bank, "questions": selectors.bank_questions(bank)}
    if request.method == "POST":
        values = {k: request.POST.get(k, "") for k in ("title", "description")}
        try:
            services.bank_save(slug=slug, bank=bank, **values)
        except services.Refused as exc:
            context["problems"] = exc.problems
        else:
            messages.success(request, "Saved the bank's title and description.")
            return redirect("authoring:bank_detail", slug=slug)
    return render(request, "authoring/banks/bank_detail.html", context)


@author_required
def bank_export(request, slug):
    bank = get_object_or_404(QuestionBank, slug=slug)
    response = HttpResponse(selectors.bank_export(bank), content_type="text/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{bank.slug}.yaml"'
    return response


def _values(question: Question | None, kind: str) -> dict:
    if question is None:
        return {}
    values = {"key": question.key, "topic": question.topic, "tags": ", ".join(question.tags)}
    if kind == Question.CHALLENGE:
        values.update(title=question.text, scenario=question.scenario,
                      root_cause=question.root_cause, solution=question.answer)
    else:
        values.update(question=question.text, answer=question.answer)
    return values


def _question_form(request, bank: QuestionBank, kind: str, question: Question | None):
    if kind not in (Question.QUESTION, Question.CHALLENGE):
        raise Http404("Unknown kind")
    context = {"bank": bank, "kind": kind, "question": question,
               "values": _values(question, kind), "errors": {}}
    if request.method == "POST":
        try:
            saved = services.question_save(bank=bank, kind=kind, data=request.POST,
                                           question=question)
        except services.Refused as exc:
            errors: dict[str, list[str]] = {}
            for problem in exc.problems:
                errors.setdefault(problem.field.split(".")[0].split("[")[0], []).append(
                    selectors.friendly(problem.message))
            context.update(values=request.POST, errors=errors, error=exc.message)
            return render(request, "authoring/banks/question_form.html", context, status=400)
        noun = "challenge" if kind == Question.CHALLENGE else "question"
        messages.success(request, f"Saved the {noun} {saved.key}; interviewers' searches "
                                  "already find it.")
        return redirect("authoring:bank_detail", slug=bank.slug)
    return render(request, "authoring/banks/question_form.html", context)


@author_required
def question_new(request, slug, kind):
    bank = get_object_or_404(QuestionBank, slug=slug)
    return _question_form(request, bank, kind, None)


@author_required
def question_edit(request, slug, key):
    bank = get_object_or_404(QuestionBank, slug=slug)
    question = get_object_or_404(Question, bank=bank, key=key)
    return _question_form(request, bank, question.kind, question)


@author_required
@require_POST
def question_retire(request, slug, key):
    question = get_object_or_404(Question, bank__slug=slug, key=key)
    retired = request.POST.get("retired") == "1"
    services.question_set_retired(question=question, retired=retired)
    messages.success(request, f"{'Retired' if retired else 'Restored'} {question.key}.")
    return redirect("authoring:bank_detail", slug=slug)
