"""Field types shared by the content schemas."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

SLUG_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Slug = Annotated[str, StringConstraints(strip_whitespace=True, pattern=SLUG_PATTERN)]
TextList = Annotated[list[Text], Field(min_length=1)]


class Strict(BaseModel):
    """Unknown fields are errors, so a misspelt field name is caught."""

    model_config = ConfigDict(extra="forbid", frozen=True)
