"""Real-browser tests: Debian's Chromium driven by Playwright, against the live app with a
real Celery worker, Redis, the database and a real sandbox."""

import os
import shutil
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.contrib.auth.models import Group, User

from content.services import content_sync
from overlap.celery import app

# Playwright's sync API keeps an event loop in this thread; the ORM calls made by the
# test itself are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "correct horse battery"


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def _plain_static_names(settings):
    """The live server serves static files from the finders, which know the files by
    their plain names; production's hashed manifest names are whitenoise's business."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="session")
def browser():
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs it")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"],
        )
        yield launched
        launched.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def worker(transactional_db, django_db_blocker):
    """A real Celery worker (in a thread) consuming the real broker."""
    with django_db_blocker.unblock(), start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=30,
        queues=["default", "authoring"],
    ) as running:
        yield running
    # The in-thread worker sends no shutdown signal: drop its warm sandboxes here.
    from runs.sandbox import sandbox_pool_stop

    sandbox_pool_stop()


@pytest.fixture
def content(transactional_db):
    return content_sync(root=settings.EXERCISES_DIR)


@pytest.fixture
def interviewer_login(transactional_db):
    # A display name: what candidates see of the interviewer (never the login, "ada").
    user = User.objects.create_user("ada", password=PASSWORD, first_name="Ada",
                                    last_name="Byron")
    user.groups.add(Group.objects.get_or_create(name="interviewers")[0])
    return user


@pytest.fixture
def log_in():
    """log_in(page, base_url, username): through the real login form."""
    def _log_in(page, base_url: str, username: str) -> None:
        page.goto(f"{base_url}/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{base_url}/exercises/")
    return _log_in


@pytest.fixture
def asgi_server(transactional_db, settings):
    """The real ASGI server (uvicorn, as `make run` starts it) with the Redis channel layer,
    in a thread of this process so it uses the test database; a free port."""
    import socket
    import threading
    import time

    import uvicorn

    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    settings.WHITENOISE_USE_FINDERS = True  # serve the bundles as built, no collectstatic
    settings.WHITENOISE_AUTOREFRESH = True
    settings.DEBUG_PROPAGATE_EXCEPTIONS = True
    from overlap.asgi import build_application

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        build_application(), host="127.0.0.1", port=port, ws="websockets",
        ws_per_message_deflate=False,
        log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
