"""An ASGI wrapper that bounds request bodies before Django sees them.

Django's ASGI handler reads the whole body (to a temporary file) before any middleware
runs, so RequestSizeLimitMiddleware alone cannot spare an ASGI server from reading a
huge upload. Wrap the HTTP application:

    application = BodySizeLimit(get_asgi_application())

A declared Content-Length above the limit is answered 413 without receiving the body;
a body without one is counted as it arrives and cut off at the limit.
"""

from django.conf import settings

from security.middleware import body_limit


def _view_name(path: str) -> str:
    from django.urls import Resolver404, resolve

    try:
        return resolve(path).view_name
    except Resolver404:
        return ""


class BodySizeLimit:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = settings.OVERLAP_MAX_REQUEST_BYTES
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None or b"transfer-encoding" in headers:
            limit = max(limit, body_limit(_view_name(scope.get("path", ""))))
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                return await _refuse(send, 400, b"Bad Content-Length.")
            if length > limit or length < 0:
                return await _refuse(send, 413, b"The request is too large.")
        received = 0

        async def bounded_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        try:
            return await self.app(scope, bounded_receive, send)
        except BodyTooLarge:
            return await _refuse(send, 413, b"The request is too large.")


class BodyTooLarge(Exception):
    pass


async def _refuse(send, status: int, text: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(text)).encode())]})
    await send({"type": "http.response.body", "body": text})


def _default_port_stripped(origin: str) -> str:
    origin = origin.strip().lower().rstrip("/")
    for scheme, port in (("http://", ":80"), ("https://", ":443")):
        if origin.startswith(scheme) and origin.endswith(port):
            return origin[: -len(port)]
    return origin


def websocket_origin_allowed(scope) -> bool:
    """A WebSocket may only be opened from this site's own pages: its Origin must be the
    scheme, host and port the browser reached (the Host header, https when the socket is
    secure or, with BEHIND_TLS, the proxy says so), or one of CSRF_TRUSTED_ORIGINS.
    Another service on the same host name (another port or scheme) is refused."""
    headers = {}
    for name, value in scope.get("headers") or []:
        headers.setdefault(name.lower(), value.decode("latin-1"))
    origin, host = headers.get(b"origin"), headers.get(b"host")
    if not origin or not host:
        return False
    secure = scope.get("scheme") == "wss"
    if settings.BEHIND_TLS:
        secure = secure or headers.get(b"x-forwarded-proto", "").strip().lower() == "https"
    own = _default_port_stripped(f"{'https' if secure else 'http'}://{host}")
    trusted = {_default_port_stripped(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    return _default_port_stripped(origin) in {own, *trusted}


class SameOriginWebSocket:
    """Refuses a WebSocket whose Origin is not exactly this site's (see above)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not websocket_origin_allowed(scope):
            from channels.security.websocket import WebsocketDenier

            return await WebsocketDenier()(scope, receive, send)
        return await self.app(scope, receive, send)
