"""Logging pieces: candidate tokens never reach a log, and run execution logs carry the
run's id.

A candidate's token is the only key to their workspace, so an access log line such as
`"GET /c/<token>/run/ HTTP/1.1" 404` would hand it to anyone who reads the logs. The
filter rewrites every record's message, and it is attached both to the console handler
(settings.LOGGING) and directly to the access loggers of the servers we run (Django's
development server, uvicorn, gunicorn), whichever handlers those servers install.
"""

import contextlib
import contextvars
import logging
import re

REDACTED = "/c/[token]/"
# /c/ followed by a token (URL-safe base64 of 32 bytes today; any path segment, to be safe)
CANDIDATE_PATH = re.compile(r"/c/[^/\s\"'?#]+(/|(?=[\s\"'?#]|$))")
ACCESS_LOGGERS = ("django.request", "django.server", "uvicorn.access", "uvicorn.error",
                  "gunicorn.access", "gunicorn.error", "daphne.server", "axes.watch_login")

_FORMATTER = logging.Formatter()
_run_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("run_id", default=None)


def redact(text: str) -> str:
    return CANDIDATE_PATH.sub(REDACTED, text)


class RedactCandidateTokens(logging.Filter):
    """Replaces /c/<token>/ by /c/[token]/ in the message, its arguments and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the formatter to complain
            return True
        if "/c/" in message:
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            # Formatted here, once (formatters reuse exc_text), so it can be redacted.
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text and "/c/" in record.exc_text:
            record.exc_text = redact(record.exc_text)
        for name in ("request_line", "path", "full_path"):  # uvicorn / gunicorn extras
            value = getattr(record, name, None)
            if isinstance(value, str) and "/c/" in value:
                setattr(record, name, redact(value))
        return True


def install_token_redaction() -> None:
    """Attach the filter to the servers' access loggers (idempotent)."""
    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactCandidateTokens) for f in logger.filters):
            logger.addFilter(RedactCandidateTokens())


class RunContext(logging.Filter):
    """Adds `run_id` to every record: the run being executed in this context, or None."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "run_id", None) is None:
            record.run_id = _run_id.get()
        return True


@contextlib.contextmanager
def run_logging_context(run_id: int):
    """Every record logged inside (this thread/task) carries run_id."""
    token = _run_id.set(run_id)
    try:
        yield
    finally:
        _run_id.reset(token)


def _json_formatter_base():
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter


class JsonLines(_json_formatter_base()):
    """python-json-logger's formatter, minus the objects Django and servers attach to
    records (the request, the socket: their text holds the path, token included), with
    every string value redacted once more, extras included."""

    DROPPED = ("request", "server_time", "scope")

    def __init__(self, *args, **kwargs):
        from pythonjsonlogger.core import RESERVED_ATTRS

        kwargs.setdefault("reserved_attrs", [*RESERVED_ATTRS, *self.DROPPED])
        super().__init__(*args, **kwargs)

    def process_log_record(self, log_data):
        return {key: redact(value) if isinstance(value, str) else value
                for key, value in super().process_log_record(log_data).items()}
