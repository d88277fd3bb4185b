"""Human labels for run verdicts: the one place every page, export and scorecard asks.

Kept as a single dict and one function so its source can later be pointed at the runner's
result contract module without touching any caller.
"""

VERDICT_LABELS = {
    "accepted": "Accepted",
    "wrong": "Wrong result",
    "too_slow": "Correct, but not fast enough",
    "timeout": "Timed out",
    "syntax_error": "Syntax error",
    "runtime_error": "Runtime error",
    "missing_entry_point": "Missing entry point",
    "memory_limit": "Memory limit exceeded",
    "output_limit": "Too much output",
    "disk_limit": "Disk limit exceeded",
    "process_limit": "Too many processes",
    "needs_gpu": "Needs a GPU",
    "internal_error": "Internal error",
}


def verdict_label(key: str | None) -> str:
    """The label for a verdict key; an unknown key is shown readably, never raw."""
    if not key:
        return ""
    return VERDICT_LABELS.get(key, key.replace("_", " ").capitalize())
