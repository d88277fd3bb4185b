"""Reading content files: YAML and Markdown text, with errors that name the file."""

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from content.errors import Problem, problems_from_validation


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


# PostgreSQL cannot store a NUL character in text (and no exercise file needs one).
NUL_PROBLEM = "holds a NUL character (a binary file?): only text can be stored"


def read_text(path: Path, root: Path, problems: list[Problem]) -> str | None:
    name = relative(path, root)
    if not path.is_file():
        problems.append(Problem(name, "", "file is missing"))
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Problem(name, "", f"not valid UTF-8 text ({exc.reason} at byte {exc.start})")
        )
        return None
    if "\x00" in text:
        problems.append(Problem(name, "", NUL_PROBLEM))
        return None
    if not text.strip():
        problems.append(Problem(name, "", "file is empty"))
        return None
    return text


def read_yaml(path: Path, root: Path, problems: list[Problem]) -> Any | None:
    text = read_text(path, root, problems)
    if text is None:
        return None
    name = relative(path, root)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc)
        problems.append(Problem(name, where, f"invalid YAML: {reason}"))
        return None
    if not isinstance(data, dict):
        problems.append(Problem(name, "", "must be a YAML mapping of fields at the top level"))
        return None
    return data


def parse[M: BaseModel](
    model: type[M], data: Any, name: str, problems: list[Problem]
) -> M | None:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_from_validation(name, exc))
        return None
