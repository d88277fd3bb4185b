"""The ASGI entry point (uvicorn in `make run` and production): HTTP through Django,
WebSockets (the live pad) through Channels, with the staff login from the session cookie
and browsers from other sites refused."""

import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "overlap.settings")
# The settings, loaded below, pool PostgreSQL connections in a process that imports this
# module: every request runs in a thread of its own here (see DATABASES in the settings).

from django.core.asgi import get_asgi_application  # noqa: E402


def build_application():
    """A fresh application reading the settings as they are now (tests override them)."""
    django_application = get_asgi_application()  # sets Django up before the imports below

    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator
    from realtime.routing import websocket_urlpatterns

    from security.asgi import BodySizeLimit, SameOriginWebSocket

    return ProtocolTypeRouter({
        # Oversized bodies are refused before Django reads them (it reads the whole body
        # before any middleware runs).
        "http": BodySizeLimit(django_application),
        # The Host must be one of ALLOWED_HOSTS and the Origin exactly this site's
        # (scheme, host and port), so no other page on the same host name can drive a
        # logged-in interviewer's socket.
        "websocket": AllowedHostsOriginValidator(
            SameOriginWebSocket(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    })


application = build_application()
