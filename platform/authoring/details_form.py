"""The exercise details form: metadata, prompt and the interviewer guide, as one HTML form.

Field names are the field paths that content errors use (`hints[1].prompt`,
`rubric[0].levels[2].score`), so a problem reported by the schema lands on the input
that caused it. Reading a POST never fails: what was typed is kept as typed (a score
that is not a number stays text), and the schema says what is wrong with it.
"""

import re
from dataclasses import dataclass, field

TEXT, INT, OPTIONAL = "text", "int", "optional"

META_SHAPE = {
    "title": TEXT,
    "summary": TEXT,
    "difficulty": TEXT,
    "time_minutes": INT,
    "tags": "tags",
    "track": TEXT,
}

GUIDE_SHAPE = {
    "overview": TEXT,
    "introduction": {"minutes": INT, "script": TEXT},
    "coding": {"minutes": INT, "steps": [TEXT], "watch_for": [TEXT]},
    "hints": [{"prompt": TEXT, "expected_answer": TEXT}],
    "walkthrough": {
        "basic_structure": [TEXT],
        "key_points": [TEXT],
        "expected_performance": TEXT,
    },
    "rubric": [
        {
            "key": TEXT,
            "title": TEXT,
            "description": TEXT,
            "levels": [{"score": INT, "label": TEXT, "description": TEXT}],
        }
    ],
    "followups": {"minutes": INT, "questions": [{"question": TEXT, "good_answer": TEXT}]},
    "applications": {
        "intro": OPTIONAL,
        "items": [{"title": TEXT, "description": TEXT}],
        "closing": OPTIONAL,
    },
}

LEVEL_LABELS = ("Missing", "Partial", "Solid", "Strong")
TOKEN = re.compile(r"([a-z_]+)|\[(\d+)\]")


def clean_text(value: str) -> str:
    """Browsers send textarea lines as CRLF; files and versions keep LF."""
    return value.replace("\r\n", "\n").replace("\r", "\n")


def _int_or_text(value: str):
    text = value.strip()
    return int(text) if re.fullmatch(r"-?\d{1,6}", text) else text


def _indices(post, prefix: str) -> list[int]:
    pattern = re.compile(re.escape(prefix) + r"\[(\d+)\]")
    found = {int(m.group(1)) for key in post for m in [pattern.match(key)] if m}
    return sorted(found)


def _read(shape, post, name: str):
    if isinstance(shape, dict):
        out = {}
        for key, sub in shape.items():
            value = _read(sub, post, f"{name}.{key}" if name else key)
            if value is not None:
                out[key] = value
        return out
    if isinstance(shape, list):
        return [_read(shape[0], post, f"{name}[{i}]") for i in _indices(post, name)]
    raw = clean_text(post.get(name, ""))
    if shape == INT:
        return _int_or_text(raw)
    if shape == OPTIONAL:
        return raw if raw.strip() else None
    if shape == "tags":
        return [tag for tag in re.split(r"[\s,]+", raw.strip()) if tag]
    return raw


def read_post(post) -> tuple[dict, str, dict]:
    """(meta without its slug, prompt, guide) from the details form's POST data."""
    meta = _read(META_SHAPE, post, "")
    prompt = clean_text(post.get("prompt", ""))
    guide = _read(GUIDE_SHAPE, post, "")
    return meta, prompt, guide


# -- blank items and the add / remove / move buttons ------------------------------------


def blank(shape):
    if isinstance(shape, dict):
        return {key: blank(sub) for key, sub in shape.items() if sub != OPTIONAL}
    if isinstance(shape, list):
        return []
    return ""


def blank_levels() -> list[dict]:
    return [{"score": i + 1, "label": label, "description": ""}
            for i, label in enumerate(LEVEL_LABELS)]


def blank_guide() -> dict:
    guide = blank(GUIDE_SHAPE)
    guide["introduction"]["minutes"] = 2
    guide["coding"]["minutes"] = 10
    guide["followups"]["minutes"] = 3
    for path in ("coding", "steps"), ("coding", "watch_for"), \
            ("walkthrough", "basic_structure"), ("walkthrough", "key_points"):
        guide[path[0]][path[1]] = [""]
    guide["hints"] = [{"prompt": "", "expected_answer": ""}]
    guide["rubric"] = [{"key": "", "title": "", "description": "", "levels": blank_levels()}]
    guide["followups"]["questions"] = [{"question": "", "good_answer": ""}]
    guide["applications"]["items"] = [{"title": "", "description": ""}]
    return guide


def _parse_path(path: str) -> list[str | int]:
    tokens: list[str | int] = []
    position = 0
    for match in TOKEN.finditer(path):
        tokens.append(match.group(1) if match.group(1) else int(match.group(2)))
        position = match.end()
        if position < len(path) and path[position] == ".":
            position += 1
    return tokens


def _shape_at(tokens):
    shape = GUIDE_SHAPE
    for token in tokens:
        if isinstance(token, int):
            if not isinstance(shape, list):
                return None
            shape = shape[0]
        else:
            if not isinstance(shape, dict) or token not in shape:
                return None
            shape = shape[token]
    return shape


def _container(guide: dict, tokens):
    node = guide
    for depth, token in enumerate(tokens):
        if isinstance(token, int):
            if not isinstance(node, list) or not 0 <= token < len(node):
                return None
            node = node[token]
        else:
            if not isinstance(node, dict):
                return None
            empty = [] if isinstance(_shape_at(tokens[: depth + 1]), list) else {}
            node = node.setdefault(token, empty)
    return node


def apply_op(guide: dict, op: str) -> str:
    """Apply `add:<list>`, `remove:<item>`, `up:<item>` or `down:<item>` to the guide.
    Returns the anchor to go back to ('' when the op is not understood)."""
    action, _, path = op.partition(":")
    tokens = _parse_path(path)
    if not tokens:
        return ""
    anchor = str(tokens[0])
    if action == "add":
        shape = _shape_at(tokens)
        items = _container(guide, tokens)
        if not isinstance(shape, list) or not isinstance(items, list):
            return ""
        if tokens[-1] == "levels":
            scores = [lv.get("score") for lv in items if isinstance(lv, dict)]
            numbers = [s for s in scores if isinstance(s, int)]
            items.append({"score": (max(numbers) + 1) if numbers else 1, "label": "",
                          "description": ""})
        elif tokens == ["rubric"]:
            items.append({"key": "", "title": "", "description": "", "levels": blank_levels()})
        else:
            items.append(blank(shape[0]))
        return anchor
    if not isinstance(tokens[-1], int):
        return ""
    items = _container(guide, tokens[:-1])
    index = tokens[-1]
    if not isinstance(items, list) or not 0 <= index < len(items):
        return ""
    if action == "remove":
        del items[index]
    elif action == "up" and index > 0:
        items[index - 1], items[index] = items[index], items[index - 1]
    elif action == "down" and index < len(items) - 1:
        items[index + 1], items[index] = items[index], items[index + 1]
    elif action not in ("up", "down"):
        return ""
    return anchor


# -- binding values and problems for the template ----------------------------------------


def field_id(name: str) -> str:
    """The HTML id of a form field (and the anchor problems link to)."""
    return "f-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass
class Field:
    name: str
    value: object = ""
    errors: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        if self.value is None:
            return ""
        if isinstance(self.value, list):
            return ", ".join(str(v) for v in self.value)
        return str(self.value)

    @property
    def id(self) -> str:
        return field_id(self.name)


@dataclass
class ListField:
    name: str
    items: list
    errors: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return field_id(self.name)


def _bind(shape, value, name: str, errors: dict[str, list[str]]):
    if isinstance(shape, dict):
        value = value if isinstance(value, dict) else {}
        bound = {
            key: _bind(sub, value.get(key), f"{name}.{key}" if name else key, errors)
            for key, sub in shape.items()
        }
        # (Template variables cannot start with "_"; no guide field is called "problems".)
        bound["problems"] = errors.get(name, []) if name else []
        return bound
    if isinstance(shape, list):
        value = value if isinstance(value, list) else []
        items = [_bind(shape[0], item, f"{name}[{i}]", errors) for i, item in enumerate(value)]
        return ListField(name, items, errors.get(name, []))
    return Field(name, "" if value is None else value, errors.get(name, []))


def bind(meta, prompt: str, guide, errors: dict[str, list[str]]) -> dict:
    """Everything the details template renders: fields with their values and errors."""
    meta = meta if isinstance(meta, dict) else {}
    return {
        "meta": _bind(META_SHAPE, meta, "", errors),
        "prompt": Field("prompt", prompt, errors.get("prompt", [])),
        "guide": _bind(GUIDE_SHAPE, guide, "", errors),
    }
