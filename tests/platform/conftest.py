import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User

from content.services import content_sync


@pytest.fixture
def content_dir(tmp_path) -> Path:
    """A private copy of the real exercises/ folder, safe to break."""
    target = tmp_path / "exercises"
    shutil.copytree(
        settings.EXERCISES_DIR, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return target


@pytest.fixture
def synced(db):
    """The real content, loaded."""
    return content_sync(root=settings.EXERCISES_DIR)


@pytest.fixture
def interviewer(db) -> User:
    user = User.objects.create_user("ada", password="correct horse battery")
    # get_or_create: a transactional test before this one flushed the migrations' groups.
    user.groups.add(Group.objects.get_or_create(name="interviewers")[0])
    return user


@pytest.fixture
def staff_client(client, interviewer):
    client.force_login(interviewer)
    return client


@pytest.fixture
def author(db) -> User:
    user = User.objects.create_user("grace", password="correct horse battery")
    user.groups.add(Group.objects.get_or_create(name="authors")[0])
    return user


@pytest.fixture
def live_session(synced, interviewer):
    from catalog.models import Exercise
    from interviews import services

    exercise = Exercise.objects.get(slug="async-parameter-server")
    session = services.session_create(interviewer=interviewer, exercise=exercise,
                                      candidate_name="Lin", candidate_email="lin@example.org")
    services.session_start(session=session)
    session.refresh_from_db()
    return session
