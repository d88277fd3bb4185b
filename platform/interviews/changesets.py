"""CodeMirror 6 ChangeSet JSON, applied on the server (the pad's authority).

A change set is a list covering the whole document in order: an integer keeps that many
characters; `[n]` deletes n; `[n, line, line…]` replaces n characters with the lines
joined by newlines. Positions count UTF-16 code units, as JavaScript strings do, so
text beyond the Basic Multilingual Plane (emoji) lands where the browser put it.

Everything here is untrusted input from a browser: shape, counts and lengths are checked.
"""

import re

MAX_PARTS = 10_000
# What PostgreSQL cannot store in text or JSON: NUL, and half of a UTF-16 surrogate pair
# (a browser's string may hold one; JSON carries it as an escape).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class BadChanges(ValueError):
    """The change set is malformed or does not fit the document."""


class UnstorableText(BadChanges):
    """The change inserts a character the database cannot store."""


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def apply_changes(text: str, changes) -> str:
    """The document after `changes`; raises BadChanges when they do not fit it."""
    if not isinstance(changes, list) or len(changes) > MAX_PARTS:
        raise BadChanges("changes must be a list")
    units = text.encode("utf-16-le")
    out: list[bytes] = []
    pos = 0
    for part in changes:
        if isinstance(part, bool):
            raise BadChanges("bad part")
        if isinstance(part, int):
            if part < 0:
                raise BadChanges("negative length")
            out.append(units[pos:pos + 2 * part])
            pos += 2 * part
        elif isinstance(part, list) and part and isinstance(part[0], int) \
                and not isinstance(part[0], bool) and part[0] >= 0 \
                and all(isinstance(line, str) for line in part[1:]):
            pos += 2 * part[0]
            if len(part) > 1:
                inserted = "\n".join(part[1:])
                if UNSTORABLE.search(inserted):
                    raise UnstorableText(
                        "it holds a NUL character or half of a surrogate pair, which cannot "
                        "be stored"
                    )
                out.append(inserted.encode("utf-16-le"))
        else:
            raise BadChanges("bad part")
        if pos > len(units):
            raise BadChanges("changes are longer than the document")
    if pos != len(units):
        raise BadChanges("changes do not cover the document")
    try:
        return b"".join(out).decode("utf-16-le")
    except UnicodeDecodeError as exc:  # a position split a surrogate pair
        raise BadChanges("a change splits a character") from exc


def replace_changes(old: str, new: str) -> list:
    """The smallest single-range change set turning `old` into `new` (for full-text saves)."""
    if old == new:
        return [utf16_length(old)] if old else []
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    head = utf16_length(old[:start])
    deleted = utf16_length(old[start:len(old) - end])
    tail = utf16_length(old[len(old) - end:])
    inserted = new[start:len(new) - end]
    parts: list = []
    if head:
        parts.append(head)
    parts.append([deleted, *inserted.split("\n")] if inserted else [deleted])
    if tail:
        parts.append(tail)
    return parts


def changed_text(changes) -> str:
    """The text a change set inserts (for playback's "who typed what")."""
    return "".join("\n".join(part[1:]) for part in changes
                   if isinstance(part, list) and len(part) > 1)
