"""Session-wide test settings."""

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Browser tests last: Playwright's sync API keeps an event loop running in the main
    thread for the rest of the session, and async_to_sync (Channels, the ASGI wrappers)
    refuses to run under one. Runs after pytest-django's own reordering."""
    items.sort(key=lambda item: "tests/browser/" in item.nodeid.replace("\\", "/"))
