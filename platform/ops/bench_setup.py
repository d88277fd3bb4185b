"""What the live benchmarks (`bench_live`, `bench_capacity`) set up before they play: the
interviewer they log in as, live sessions of an exercise, and ports for their own stack."""

import socket

from django.contrib.auth.models import Group, User

from interviews import services
from interviews.models import InterviewSession

STAFF = ("bench-interviewer", "bench-password-not-secret")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def staff_user() -> User:
    """The benchmarks' interviewer, with the password in STAFF (they log in for real)."""
    user, _ = User.objects.get_or_create(username=STAFF[0])
    user.set_password(STAFF[1])
    user.save()
    user.groups.add(Group.objects.get(name="interviewers"))
    return user


def live_session(user: User, exercise, code: str | None = None) -> InterviewSession:
    """A started session; with ``code``, the pad holds it (as if the candidate had typed it)."""
    session = services.session_create(interviewer=user, exercise=exercise,
                                      candidate_name="Bench", candidate_email="b@example.org")
    services.session_start(session=session)
    if code is not None:
        services.code_save(session=session, code=code)
    return session
