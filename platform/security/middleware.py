"""Request-level hardening: body size limits and no caching of interview pages."""

from django.conf import settings
from django.http import HttpResponse
from django.urls import Resolver404, resolve
from django.utils.cache import add_never_cache_headers

# URL namespaces whose pages hold a candidate's code, an interviewer's notes or scores:
# no browser, proxy or shared computer may keep a copy.
NO_STORE_NAMESPACES = {"candidate", "interviews"}
# Views that accept a bigger body than OVERLAP_MAX_REQUEST_BYTES: name -> setting.
LARGER_BODIES = {"authoring:import": "OVERLAP_MAX_IMPORT_BYTES"}


def _view_name(request) -> str:
    try:
        return resolve(request.path_info).view_name
    except Resolver404:
        return ""


def body_limit(view_name: str) -> int:
    setting = LARGER_BODIES.get(view_name)
    return getattr(settings, setting) if setting else settings.OVERLAP_MAX_REQUEST_BYTES


class RequestSizeLimitMiddleware:
    """413 for a request whose declared Content-Length is above the view's limit, decided
    from the header alone: the body is never read, so a huge upload costs nothing.

    Placed before anything that reads request.POST/FILES (CSRF does, in process_view).
    A body without Content-Length (chunked) reaches Django's WSGI handler as an empty
    body; under ASGI, security.asgi.BodySizeLimit counts the bytes as they arrive.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        declared = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(declared)
        except ValueError:
            return HttpResponse("Bad Content-Length.", status=400, content_type="text/plain")
        if length > settings.OVERLAP_MAX_REQUEST_BYTES or length < 0:
            limit = body_limit(_view_name(request))
            if length > limit or length < 0:
                return HttpResponse(
                    f"The request is too large: {length} bytes, at most {limit} accepted.",
                    status=413, content_type="text/plain",
                )
        return self.get_response(request)


class NoStoreMiddleware:
    """Cache-Control: no-store on candidate pages and the interviewer's console/scorecard."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.namespace in NO_STORE_NAMESPACES:
            add_never_cache_headers(response)
        return response


class NulCharacterMiddleware:
    """400 for a form or query holding a NUL character, which PostgreSQL cannot store or
    compare (text fields, JSON): a clear refusal instead of a server error, wherever the
    view reads its fields (Django's form fields refuse NUL too; views that read
    request.POST directly, like the pad's save and the authoring pages, did not).

    After the access checks: a stranger learns nothing here that a login page would not
    tell. The pad's WebSocket checks its own messages (interviews.changesets)."""

    MESSAGE = ("The form holds a NUL character (\\0), which cannot be stored; nothing was "
               "saved. Remove it and send the form again.")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        fields = [request.GET]
        if request.method == "POST":
            fields.append(request.POST)
        for query in fields:
            for key, values in query.lists():
                if "\x00" in key or any("\x00" in value for value in values):
                    return HttpResponse(self.MESSAGE, status=400, content_type="text/plain")
        return self.get_response(request)

