"""Errors for content files: each names the file, the field and what is wrong."""

from pydantic import ValidationError


class ContentError(Exception):
    """One or more problems in the content folder; nothing was loaded."""

    def __init__(self, problems: list["Problem"]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class Problem:
    def __init__(self, file: str, field: str, message: str):
        self.file, self.field, self.message = file, field, message

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"

    def __repr__(self) -> str:
        return f"Problem({str(self)!r})"


def field_path(loc: tuple) -> str:
    """('hints', 2, 'expected_answer') -> 'hints[2].expected_answer'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def problems_from_validation(file: str, error: ValidationError) -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False):
        loc = item["loc"]
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown field (check its spelling against exercises/README.md)"
        elif item["type"] == "missing":
            message = "required field is missing"
        problems.append(Problem(file, field_path(loc), message))
    return problems
