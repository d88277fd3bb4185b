"""Staff roles are Django groups."""

INTERVIEWERS = "interviewers"
AUTHORS = "authors"
ALL_GROUPS = (INTERVIEWERS, AUTHORS)


def is_author(user) -> bool:
    return user.is_superuser or user.groups.filter(name=AUTHORS).exists()
