"""An oversized upload is refused from its declared length, before the body is read."""

import asyncio
import contextlib
import socket
import urllib.request
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from security.asgi import BodySizeLimit

HUGE = 50 * 1024 * 1024


# The start of a well-formed upload: a server that parses the body waits for the rest.
UPLOAD_START = (b'--x\r\nContent-Disposition: form-data; name="archive"; filename="a.zip"\r\n'
                b"Content-Type: application/zip\r\n\r\nPK\x03\x04")


def _raw_post(base_url: str, path: str, declared: int, sent: bytes = UPLOAD_START) -> bytes:
    """POST with a Content-Length far above what is sent: a server that tried to read the
    body would wait for it until our timeout; one that refuses from the header answers."""
    parts = urlsplit(base_url)
    # With a CSRF cookie, as a browser has one: else CSRF would refuse before parsing.
    with urllib.request.urlopen(f"{base_url}/accounts/login/", timeout=10) as login:
        cookie = login.headers["Set-Cookie"].split(";")[0]
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}\r\nCookie: {cookie}\r\n"
            "Content-Type: multipart/form-data; boundary=x\r\n"
            f"Content-Length: {declared}\r\nConnection: close\r\n\r\n".encode() + sent)
        sock.settimeout(10)
        response = b""
        # Only the answer's head: the development server drains a request's unread body
        # when it closes the connection (to keep it usable), which would take forever here.
        while b"\r\n\r\n" not in response and (chunk := sock.recv(65536)):
            response += chunk
        sock.settimeout(2)
        with contextlib.suppress(TimeoutError):
            response += sock.recv(65536)
    return response


def test_the_zip_import_refuses_a_huge_declared_length_without_reading_it(live_server):
    response = _raw_post(live_server.url, "/authoring/import/", HUGE)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert b"too large" in response


def test_any_other_post_has_the_smaller_general_limit(live_server):
    declared = settings.OVERLAP_MAX_REQUEST_BYTES + 1
    assert declared < settings.OVERLAP_MAX_IMPORT_BYTES
    response = _raw_post(live_server.url, "/c/some-token/save/", declared)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]


@pytest.mark.django_db
def test_an_import_within_the_limit_reaches_the_view(client, author):
    client.force_login(author)
    response = client.post("/authoring/import/", {"archive": ""})
    assert response.status_code == 200  # the form again, saying what was wrong


@pytest.mark.django_db
def test_a_nonsense_content_length_is_a_bad_request(client):
    response = client.generic("POST", "/accounts/login/", b"x", CONTENT_LENGTH="lots")
    assert response.status_code == 400


def _asgi_call(app, headers, chunks):
    sent, received = [], []

    async def receive():
        body = chunks.pop(0) if chunks else b""
        received.append(body)
        return {"type": "http.request", "body": body, "more_body": bool(chunks)}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/authoring/import/",
             "headers": headers}
    asyncio.run(app(scope, receive, send))
    return sent, received


def test_under_asgi_a_declared_huge_body_is_refused_unread():
    async def app(scope, receive, send):  # stands in for Django: reads everything
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent, received = _asgi_call(BodySizeLimit(app),
                                [(b"content-length", str(HUGE).encode())], [b"x" * 10])
    assert sent[0]["status"] == 413
    assert received == []


def test_under_asgi_a_chunked_body_is_cut_off_at_the_limit():
    async def app(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})

    chunk = b"x" * (1024 * 1024)
    sent, received = _asgi_call(BodySizeLimit(app), [(b"transfer-encoding", b"chunked")],
                                [chunk] * 10)
    assert sent[0]["status"] == 413
    assert sum(map(len, received)) <= settings.OVERLAP_MAX_IMPORT_BYTES + len(chunk)
    assert len(received) < 10  # stopped reading
