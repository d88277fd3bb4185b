"""Result helpers kept for graders written against the first runner (``from runner.result
import Check``): the contract itself lives in :mod:`runner.contract`; bounded output
buffers live here.
"""

from __future__ import annotations

import io

from runner.contract import (  # noqa: F401 - re-exported for graders and the GPU track
    MESSAGE_LIMIT,
    OUTPUT_LIMIT,
    SCHEMA,
    TRACE_LIMIT,
    TRACEBACK_LIMIT,
    Check,
    clip,
    empty_metrics,
    make_result,
)


class BoundedText(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.limit - self._kept
        if room > 0:
            part = text[:room]
            self._parts.append(part)
            self._kept += len(part)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self.dropped:
            text += f"\n… [{self.dropped} more characters of output cut]"
        return text


class NullText(BoundedText):
    """Swallows output (runs whose output nobody reads)."""

    def __init__(self) -> None:
        super().__init__(0)


