"""The client address django-axes counts failed logins against."""

from django.conf import settings


def client_ip(request) -> str:
    """The socket's peer, or, behind OVERLAP_TRUSTED_PROXIES proxies that each append to
    X-Forwarded-For, the address the outermost trusted proxy saw. Entries further left
    were written by the client and could be anything, so they are never used."""
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.OVERLAP_TRUSTED_PROXIES
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in
                 request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if len(forwarded) >= proxies:
        return forwarded[-proxies]
    return remote
