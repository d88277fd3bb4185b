"""The question-bank file format (documented in exercises/README.md)."""

from typing import Annotated

from pydantic import Field, model_validator

from content.fields import Slug, Strict, Text

Tags = Annotated[list[Slug], Field(default_factory=list)]


class BankQuestion(Strict):
    key: Slug
    topic: Text
    tags: Tags
    question: Text
    answer: Text


class Challenge(Strict):
    key: Slug
    topic: Text
    tags: Tags
    title: Text
    scenario: Text
    root_cause: Text
    solution: Text


class ChecklistEntry(Strict):
    title: Text
    advice: Text


class Bank(Strict):
    slug: Slug
    title: Text
    description: Text
    questions: Annotated[list[BankQuestion], Field(default_factory=list)]
    challenges: Annotated[list[Challenge], Field(default_factory=list)]
    checklist: Annotated[list[ChecklistEntry], Field(default_factory=list)]

    @model_validator(mode="after")
    def _keys_unique_and_not_empty(self) -> "Bank":
        if not self.questions and not self.challenges:
            raise ValueError("a bank needs at least one question or challenge")
        keys = [q.key for q in self.questions] + [c.key for c in self.challenges]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            repeated = ", ".join(duplicates)
            raise ValueError(f"keys must be unique within a bank; repeated: {repeated}")
        return self
