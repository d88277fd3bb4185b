"""Is a SECRET_KEY strong enough for production? Plain Python: settings.py imports it."""

MIN_LENGTH = 50
MIN_UNIQUE_CHARACTERS = 5
INSECURE_PREFIXES = ("django-insecure", "insecure-", "change-me", "changeme", "test-only")


def secret_key_problem(key: str) -> str | None:
    """Why `key` must not sign production sessions, or None when it is fine.

    The same bar as Django's deploy check (security.W009), plus the placeholder names
    people copy from examples.
    """
    if len(key) < MIN_LENGTH:
        return f"it has {len(key)} characters; at least {MIN_LENGTH} are needed"
    if len(set(key)) < MIN_UNIQUE_CHARACTERS:
        return f"it uses fewer than {MIN_UNIQUE_CHARACTERS} different characters"
    if key.lower().startswith(INSECURE_PREFIXES):
        return "it starts like a placeholder (insecure, change-me, test-only…)"
    return None
