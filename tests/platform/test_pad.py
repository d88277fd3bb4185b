"""The shared pad's authority: ordered updates, one text, bounds on what a browser sends."""

import pytest
from django.test import override_settings

from interviews import pad, services
from interviews.changesets import BadChanges, apply_changes, replace_changes
from interviews.models import InterviewSession, PadUpdate

pytestmark = pytest.mark.django_db


def _insert_at(text: str, pos: int, inserted: str) -> list:
    """The ChangeSet JSON CodeMirror sends for typing `inserted` at `pos`."""
    parts: list = [pos] if pos else []
    parts.append([0, *inserted.split("\n")])
    if len(text) - pos:
        parts.append(len(text) - pos)
    return parts


def _type(session, text_before, pos, inserted, *, author, version=None, client="tab-a"):
    return pad.pad_push(session_id=session.pk,
                        version=session.pad_version if version is None else version,
                        updates=[{"clientID": client,
                                  "changes": _insert_at(text_before, pos, inserted)}],
                        author=author)


def test_changesets_insert_delete_and_count_positions_as_the_browser_does():
    assert apply_changes("hello", [5, [0, "", "world"]]) == "hello\nworld"
    assert apply_changes("hello world", [5, [6]]) == "hello"
    # An emoji is two UTF-16 units in the browser: the next position is after both.
    assert apply_changes("a😀b", [3, [0, "!"], 1]) == "a😀!b"
    for bad in ([9], [[3], 1, 1], "x", [-1], [[1, 2]], [True, 4]):
        with pytest.raises(BadChanges):
            apply_changes("abcd", bad)
    for old, new in [("", "x"), ("abc", "abXc"), ("line\n", ""), ("😀x", "😀yx")]:
        assert apply_changes(old, replace_changes(old, new)) == new


def test_updates_are_applied_in_order_and_each_is_stored_with_who_and_when(live_session,
                                                                          interviewer):
    start = live_session.pad_text
    candidate = pad.author_for_candidate(live_session)
    first = _type(live_session, start, 0, "# a\n", author=candidate)
    assert first.accepted and first.version == 0
    live_session.refresh_from_db()
    second = _type(live_session, live_session.pad_text, 0, "# b\n",
                   author=pad.author_for_interviewer(interviewer), client="staff")
    assert second.accepted
    live_session.refresh_from_db()
    assert live_session.pad_text == "# b\n# a\n" + start
    assert live_session.pad_version == 2
    rows = list(live_session.pad_updates.values_list("version", "role", "author"))
    assert rows == [(1, "candidate", "Lin"), (2, "interviewer", "Interviewer")]  # no login name
    assert pad.pad_text_at(live_session, 1) == "# a\n" + start
    assert pad.pad_text_at(live_session, 0) == start


def test_a_client_behind_the_server_is_refused_and_must_rebase(live_session):
    start = live_session.pad_text
    author = pad.author_for_candidate(live_session)
    assert _type(live_session, start, 0, "x", author=author).accepted
    stale = _type(live_session, start, 0, "y", author=author, version=0, client="tab-b")
    assert not stale.accepted and stale.version == 1
    live_session.refresh_from_db()
    assert live_session.pad_text == "x" + start  # nothing half-applied


def test_an_ended_session_is_read_only_for_everyone(live_session, interviewer):
    services.session_end(session=live_session)
    live_session.refresh_from_db()
    for author in (pad.author_for_candidate(live_session),
                   pad.author_for_interviewer(interviewer)):
        with pytest.raises(pad.PadRefused, match="ended"):
            _type(live_session, live_session.pad_text, 0, "late", author=author)


def test_watch_only_interviewer_cannot_type_but_the_candidate_can(live_session, interviewer):
    services.readonly_set(session=live_session, readonly=True)
    with pytest.raises(pad.PadRefused, match="read-only for interviewers"):
        _type(live_session, live_session.pad_text, 0, "x",
              author=pad.author_for_interviewer(interviewer))
    assert _type(live_session, live_session.pad_text, 0, "x",
                 author=pad.author_for_candidate(live_session)).accepted


def test_the_document_may_not_grow_past_64_kib(live_session):
    with pytest.raises(pad.PadRefused, match="64 KiB"):
        _type(live_session, live_session.pad_text, 0, "#" * (64 * 1024),
              author=pad.author_for_candidate(live_session))
    live_session.refresh_from_db()
    assert live_session.pad_version == 0


@override_settings(OVERLAP_PAD_UPDATES_PER_10S=5)
def test_candidate_updates_are_rate_limited(live_session):
    author = pad.author_for_candidate(live_session)
    for _ in range(5):
        live_session.refresh_from_db()
        assert _type(live_session, live_session.pad_text, 0, "x", author=author).accepted
    live_session.refresh_from_db()
    with pytest.raises(pad.PadRefused, match="too fast"):
        _type(live_session, live_session.pad_text, 0, "x", author=author)


@override_settings(OVERLAP_PAD_QUOTA_BYTES=400)
def test_candidate_updates_and_saves_share_a_storage_quota(client, live_session):
    author = pad.author_for_candidate(live_session)
    live_session.refresh_from_db()
    assert _type(live_session, live_session.pad_text, 0, "y" * 200, author=author).accepted
    # A whole-text save is stored as an update too, and counts against the same quota.
    live_session.refresh_from_db()
    response = client.post(f"/c/{live_session.token}/save/",
                           {"code": "z" * 300 + live_session.pad_text})
    assert response.status_code == 409
    assert "storage limit" in response.content.decode()


def test_a_save_is_applied_to_the_pad_and_acknowledged_with_a_revision(client, live_session):
    response = client.post(f"/c/{live_session.token}/save/", {"code": "value = 1\n"})
    assert response.status_code == 200
    live_session.refresh_from_db()
    assert live_session.pad_text == "value = 1\n"
    assert live_session.revisions.order_by("-number").first().code == "value = 1\n"
    assert PadUpdate.objects.filter(session=live_session, role="candidate").count() == 1


def test_a_run_grades_the_servers_text_not_what_the_browser_claims(client, live_session):
    author = pad.author_for_candidate(live_session)
    _type(live_session, live_session.pad_text, 0, "# typed in the pad\n", author=author)
    client.post(f"/c/{live_session.token}/run/", {"version": "1", "code": "forged = True\n"})
    run = live_session.runs.get()
    assert run.code.startswith("# typed in the pad\n")
    assert "forged" not in run.code


def test_a_renewed_link_replaces_the_old_one(client, live_session):
    old = live_session.token
    new = services.token_renew(session=live_session)
    assert client.get(f"/c/{old}/").status_code == 404
    assert client.get(f"/c/{new}/").status_code == 200


@override_settings(OVERLAP_CANDIDATE_LINK_HOURS=1)
def test_the_link_expires_some_time_after_the_session_ended(client, live_session):
    from datetime import timedelta

    from django.utils import timezone

    services.session_end(session=live_session)
    assert client.get(f"/c/{live_session.token}/").status_code == 200  # the thank-you page
    InterviewSession.objects.filter(pk=live_session.pk).update(
        ended_at=timezone.now() - timedelta(hours=2))
    assert client.get(f"/c/{live_session.token}/").status_code == 404


@pytest.mark.parametrize("bad", ["\x00", "a\ud800b"], ids=["nul", "lone-surrogate"])
def test_text_the_database_cannot_store_is_refused_with_a_reason(client, live_session, bad):
    """A NUL or a lone surrogate (a browser can send both) would make PostgreSQL refuse the
    row: the push is refused with a reason, the pad and its history are untouched."""
    start = live_session.pad_text
    author = pad.author_for_candidate(live_session)
    with pytest.raises(pad.PadRefused, match="cannot be stored"):
        _type(live_session, start, 0, f"x = '{bad}'", author=author)
    # (A form's NUL is refused before any view: tests/platform/test_nul_input.py. A form
    # cannot carry a lone surrogate: the browser's UTF-8 cannot.)
    live_session.refresh_from_db()
    assert live_session.pad_text == start
    assert live_session.pad_version == 0
    assert not PadUpdate.objects.filter(session=live_session).exists()
