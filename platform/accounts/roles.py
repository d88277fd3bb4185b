"""Staff roles are Django groups."""

INTERVIEWERS = "interviewers"
AUTHORS = "authors"
ALL_GROUPS = (INTERVIEWERS, AUTHORS)


def _in_group(user, *names: str) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_overlap_groups", None)
    if cached is None:
        cached = user._overlap_groups = set(user.groups.values_list("name", flat=True))
    return bool(cached & set(names))


def is_author(user) -> bool:
    return _in_group(user, AUTHORS)


def is_interviewer(user) -> bool:
    return _in_group(user, INTERVIEWERS)


def is_staff_member(user) -> bool:
    """May use the interview side (catalog, guides, question banks, sessions): interviewers,
    and authors (who write what interviewers use, and see every session)."""
    return _in_group(user, INTERVIEWERS, AUTHORS)
