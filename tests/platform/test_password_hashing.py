"""Logging in is quick and stays safe: passwords are stored as Argon2id with OWASP's
parameters (a check costs tens of milliseconds, not PBKDF2's half second on a 2-CPU
machine), and a password stored before is upgraded at its next login."""

import statistics
import time

import pytest
from django.contrib.auth.hashers import (
    Argon2PasswordHasher,
    check_password,
    identify_hasher,
    make_password,
)
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db

RIGHT = "correct horse battery"


def _login(client, password, username="ada"):
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_new_passwords_are_stored_as_argon2id_with_owasp_parameters(interviewer):
    stored = User.objects.get(pk=interviewer.pk).password
    assert stored.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    assert identify_hasher(stored).algorithm == "argon2"


def test_a_pbkdf2_password_is_upgraded_to_argon2_at_the_next_login(client, interviewer):
    legacy = make_password(RIGHT, hasher="pbkdf2_sha256")
    User.objects.filter(pk=interviewer.pk).update(password=legacy)
    assert _login(client, "wrong").status_code == 200  # refused: nothing re-stored
    assert User.objects.get(pk=interviewer.pk).password == legacy
    response = _login(client, RIGHT)
    assert response.status_code == 302 and response.url == "/exercises/"
    upgraded = User.objects.get(pk=interviewer.pk).password
    assert upgraded.startswith("argon2$argon2id$")
    assert check_password(RIGHT, upgraded) and not check_password("wrong", upgraded)
    client.post("/accounts/logout/")
    assert _login(client, RIGHT).status_code == 302  # the upgraded hash logs in


def test_an_argon2_hash_with_other_costs_is_re_stored_with_ours(client, interviewer):
    # Django's own defaults (100 MiB, 8 lanes), as stored by an earlier configuration.
    heavy = Argon2PasswordHasher().encode(RIGHT, Argon2PasswordHasher().salt())
    assert "m=102400" in heavy
    User.objects.filter(pk=interviewer.pk).update(password=heavy)
    assert _login(client, RIGHT).status_code == 302
    assert "m=19456,t=2,p=1" in User.objects.get(pk=interviewer.pk).password


def test_checking_a_password_costs_a_fraction_of_pbkdf2(interviewer):
    """Measured back to back, so a loaded machine slows both alike."""
    argon2 = User.objects.get(pk=interviewer.pk).password
    pbkdf2 = make_password(RIGHT, hasher="pbkdf2_sha256")

    def median_check(encoded: str) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            assert check_password(RIGHT, encoded)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    assert median_check(argon2) * 4 < median_check(pbkdf2)
