"""Which staff group may open which part of the site.

LoginRequiredMiddleware already sends anonymous visitors to the login page; this
middleware checks, for a logged-in user, that they belong to a staff group:

- authoring (the `authoring` namespace): authors and superusers;
- everything else that is not explicitly public: interviewers, authors and superusers.

Public by design: views marked @login_not_required (login, /healthz, /metrics, the
candidate's /c/<token>/ pages), the account pages (log out, password change) and the
admin, which checks is_staff itself. A logged-in user in no group gets a 403 page that
says to ask an admin for access. Deny by default: a new app's URLs are covered without
anyone remembering to add a decorator.
"""

from django.shortcuts import render

from accounts.roles import is_author, is_staff_member

OPEN_TO_ANY_USER = {"admin"}  # namespaces that check permissions themselves
ACCOUNT_VIEWS = {"logout", "password_change", "password_change_done"}
AUTHOR_NAMESPACES = {"authoring"}


def required_role(match, view_func) -> str | None:
    """'author', 'staff', or None when no staff group is needed."""
    if not getattr(view_func, "login_required", True):
        return None  # @login_not_required: public (candidate token pages, login, health)
    if match.namespaces and match.namespaces[0] in OPEN_TO_ANY_USER:
        return None
    if not match.namespace and match.url_name in ACCOUNT_VIEWS:
        return None
    if match.namespaces and match.namespaces[0] in AUTHOR_NAMESPACES:
        return "author"
    return "staff"


class StaffAccessMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        user = request.user
        if not user.is_authenticated:
            return None  # LoginRequiredMiddleware (before us) handles anonymous visitors
        role = required_role(request.resolver_match, view_func)
        if role is None:
            return None
        allowed = is_author(user) if role == "author" else is_staff_member(user)
        if allowed:
            return None
        return render(request, "accounts/no_access.html",
                      {"needed": "authors" if role == "author" else "interviewers"},
                      status=403)
