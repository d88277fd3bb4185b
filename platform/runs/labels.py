"""Human labels for run verdicts: the one place every page, export and scorecard asks.

The labels are the runner's own (``runner.contract.LABELS``), so a verdict the engine or
the sandbox can give always has one.
"""

from runner.contract import LABELS, label

VERDICT_LABELS = {verdict.value: text for verdict, text in LABELS.items()}


def verdict_label(key: str | None) -> str:
    """The label for a verdict key; an unknown key is shown readably, never raw."""
    return label(key) if key else ""
