"""The pad's socket when the database fails under it (PostgreSQL unreachable, SQLite's disk
full): the socket is closed with "try again" (4503), so the page reconnects at once and
sends again the change it still holds; a failed socket never keeps counting against the
client's few sockets (before, four failed keystrokes locked a candidate out of the pad
until the web server restarted)."""

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError

from interviews import pad
from tests.platform.test_pad_channel import _candidate, _next

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failed_write_closes_with_try_again_and_frees_the_place(live_session, settings,
                                                                  monkeypatch):
    settings.OVERLAP_PAD_SOCKETS_PER_CLIENT = 2
    working = pad.pad_push

    def disk_full(**kwargs):
        raise OperationalError("database or disk is full")

    async def type_once(ws, version, length):
        await ws.send_json_to({"type": "push", "version": version, "updates": [
            {"clientID": "c1", "changes": [length, [0, "x"]]}]})

    async def scenario():
        monkeypatch.setattr(pad, "pad_push", disk_full)
        closes = []
        for _ in range(4):  # twice the sockets the candidate may hold at once
            ws = _candidate(live_session)
            connected, _ = await ws.connect()
            assert connected
            hello = await _next(ws, "hello")
            await type_once(ws, hello["version"], len(hello["doc"]))
            closes.append(await ws.receive_output(timeout=3))
            await ws.wait()
        monkeypatch.setattr(pad, "pad_push", working)
        ws = _candidate(live_session)
        connected, code = await ws.connect()
        assert connected, code  # not refused as one too many
        hello = await _next(ws, "hello")
        await type_once(ws, hello["version"], len(hello["doc"]))
        acked = await _next(ws, "updates")
        await ws.disconnect()
        return closes, acked

    closes, acked = async_to_sync(scenario)()
    assert closes == [{"type": "websocket.close", "code": 4503}] * 4
    assert acked["pushed"] is True
    live_session.refresh_from_db()
    assert live_session.pad_text.endswith("x") and live_session.pad_version == 1
