from accounts.roles import is_author


def roles(request) -> dict:
    """What the navigation needs to know about the logged-in staff member."""
    user = getattr(request, "user", None)
    authenticated = bool(user and user.is_authenticated)
    return {"user_is_author": authenticated and is_author(user)}
