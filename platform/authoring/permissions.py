"""Who may author: the `authors` group and superusers. Checked in every view."""

from functools import wraps

from django.core.exceptions import PermissionDenied

from accounts.roles import is_author


def author_required(view):
    """403 for staff who are not authors. (Anonymous visitors, candidates included, never
    get here: LoginRequiredMiddleware sends them to the login page.)"""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not is_author(request.user):
            raise PermissionDenied("Authoring is for the authors group.")
        return view(request, *args, **kwargs)

    return wrapper
