"""The exercise file format (documented in exercises/README.md)."""

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from content.fields import Slug, Strict, Text, TextList

Minutes = Annotated[int, Field(ge=1, le=240)]


class ExerciseMeta(Strict):
    slug: Slug
    title: Text
    summary: Text
    difficulty: Literal["easy", "medium", "hard"]
    time_minutes: Minutes
    tags: Annotated[list[Slug], Field(min_length=1)]
    track: Literal["simulated", "gpu"] = "simulated"


class Introduction(Strict):
    minutes: Minutes
    script: Text


class Coding(Strict):
    minutes: Minutes
    steps: TextList
    watch_for: TextList


class Hint(Strict):
    prompt: Text
    expected_answer: Text


class Walkthrough(Strict):
    basic_structure: TextList
    key_points: TextList
    expected_performance: Text


class Level(Strict):
    score: Annotated[int, Field(ge=0, le=10)]
    label: Text
    description: Text


class Criterion(Strict):
    key: Slug
    title: Text
    description: Text
    levels: Annotated[list[Level], Field(min_length=2)]

    @field_validator("levels")
    @classmethod
    def _ascending_unique_scores(cls, levels: list[Level]) -> list[Level]:
        scores = [level.score for level in levels]
        if scores != sorted(set(scores)):
            raise ValueError(f"level scores must be unique and ascending, got {scores}")
        return levels


class FollowupQuestion(Strict):
    question: Text
    good_answer: Text


class Followups(Strict):
    minutes: Minutes
    questions: Annotated[list[FollowupQuestion], Field(min_length=1)]


class Application(Strict):
    title: Text
    description: Text


class Applications(Strict):
    intro: Text | None = None
    items: Annotated[list[Application], Field(min_length=1)]
    closing: Text | None = None


class Guide(Strict):
    overview: Text
    introduction: Introduction
    coding: Coding
    hints: Annotated[list[Hint], Field(min_length=1)]
    walkthrough: Walkthrough
    rubric: Annotated[list[Criterion], Field(min_length=1)]
    followups: Followups
    applications: Applications

    @model_validator(mode="after")
    def _unique_rubric_keys(self) -> "Guide":
        keys = [criterion.key for criterion in self.rubric]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"rubric keys must be unique; repeated: {', '.join(duplicates)}")
        return self
