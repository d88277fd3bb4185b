"""The server-error handler: a database that cannot be reached is a 503 that says so.

Django calls ``handler500`` while it handles the exception, so the exception is still in
``sys.exc_info()``. An outage of the database (PostgreSQL stopped or restarting, SQLite's
disk full) reaches views, the session and the login check alike; the page then says the
service is briefly unavailable and nothing is lost (acknowledged edits are stored, the pad
keeps unsent ones in the browser), and asks the browser to retry. Neither page touches
the database.
"""

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, HttpResponseServerError
from django.template.loader import render_to_string


def server_error(request, *args, **kwargs):
    exception = sys.exc_info()[1]
    if isinstance(exception, (OperationalError, InterfaceError)):
        if request.headers.get("HX-Request"):
            response = HttpResponse(
                "The service is briefly unavailable; your work is kept. Try again in a moment.",
                status=503, content_type="text/plain; charset=utf-8")
        else:
            response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = "5"
        return response
    return HttpResponseServerError(render_to_string("500.html"))
