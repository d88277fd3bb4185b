"""Writes to the question banks."""

from typing import TYPE_CHECKING

from qa.models import ChecklistItem, Question, QuestionBank

if TYPE_CHECKING:
    from content.folders import BankFile


def bank_store(*, bank_file: "BankFile") -> str:
    """Upsert a bank by question key; questions gone from the file are retired, not deleted."""
    data = bank_file.bank
    bank = QuestionBank.objects.select_for_update().filter(slug=data.slug).first()
    if bank is not None and bank.content_hash == bank_file.content_hash:
        return "unchanged"
    created = bank is None
    if created:
        bank = QuestionBank(slug=data.slug)
    bank.title, bank.description, bank.content_hash = (
        data.title, data.description, bank_file.content_hash
    )
    bank.save()

    rows = [
        (q.key, {"kind": Question.QUESTION, "position": i, "topic": q.topic, "tags": list(q.tags),
                 "text": q.question, "answer": q.answer, "scenario": "", "root_cause": "",
                 "retired": False})
        for i, q in enumerate(data.questions)
    ] + [
        (c.key, {"kind": Question.CHALLENGE, "position": i, "topic": c.topic, "tags": list(c.tags),
                 "text": c.title, "answer": c.solution, "scenario": c.scenario,
                 "root_cause": c.root_cause, "retired": False})
        for i, c in enumerate(data.challenges)
    ]
    for key, defaults in rows:
        Question.objects.update_or_create(bank=bank, key=key, defaults=defaults)
    bank.questions.exclude(key__in=[key for key, _ in rows]).update(retired=True)

    bank.checklist.all().delete()
    ChecklistItem.objects.bulk_create(
        ChecklistItem(bank=bank, position=i, title=item.title, advice=item.advice)
        for i, item in enumerate(data.checklist)
    )
    return "created" if created else "updated"
