"""Repeated failed logins lock that username from that address for a while (django-axes,
counted in the database so every web process sees the same count)."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

RIGHT = "correct horse battery"


def _login(client, password, username="ada", **extra):
    return client.post("/accounts/login/", {"username": username, "password": password},
                       **extra)


def _fail(client, times, **extra):
    for _ in range(times):
        # The form again; the failure that reaches the limit already answers 429.
        assert _login(client, "wrong", **extra).status_code in (200, 429)


def test_five_failed_logins_lock_the_account_with_a_clear_message(client, interviewer):
    _fail(client, 4)
    response = _login(client, "wrong")
    assert response.status_code == 429
    body = response.content.decode()
    assert "Too many failed logins" in body
    assert "locked for 15 minutes" in body
    # Even the right password is refused while locked, from a fresh browser too.
    response = _login(Client(), RIGHT)
    assert response.status_code == 429
    assert "_auth_user_id" not in Client().session


def test_a_locked_username_can_still_log_in_from_another_address(client, interviewer):
    _fail(client, 5)
    assert _login(client, RIGHT).status_code == 429
    response = _login(Client(), RIGHT, REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 302


def test_a_successful_login_resets_the_count(client, interviewer):
    _fail(client, 4)
    assert _login(client, RIGHT).status_code == 302
    client.post("/accounts/logout/")
    _fail(client, 4)
    assert _login(client, RIGHT).status_code == 302


def test_behind_a_proxy_the_forwarded_address_counts_not_a_spoofed_one(
        client, interviewer, settings):
    settings.OVERLAP_TRUSTED_PROXIES = 1
    # The attacker writes a new fake address in front each time; the proxy appends the
    # real one last. All five failures count against the real address.
    for n in range(5):
        _login(client, "wrong", REMOTE_ADDR="127.0.0.1",
               HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, 203.0.113.9")
    assert _login(client, RIGHT, REMOTE_ADDR="127.0.0.1",
                  HTTP_X_FORWARDED_FOR="192.0.2.77, 203.0.113.9").status_code == 429
    # Another real client behind the same proxy is not locked out.
    assert _login(Client(), RIGHT, REMOTE_ADDR="127.0.0.1",
                  HTTP_X_FORWARDED_FOR="198.51.100.4").status_code == 302


def test_one_address_trying_many_usernames_is_locked(client, interviewer):
    # A sweep: one wrong password for each of many accounts from the same address.
    for n in range(5):
        _login(client, "wrong", username=f"user{n}")
    assert _login(client, RIGHT).status_code == 429
    # Another address is not affected.
    assert _login(Client(), RIGHT, REMOTE_ADDR="10.1.2.3").status_code == 302
