"""Pushing session events to the browsers connected to its pad (Channels group).

Events go to everyone on the session's group, candidates included, so each carries
only candidate-safe data; the consumers in `realtime/` forward a fixed set of fields.
Sent after the transaction commits, so a browser never hears of something not stored.
"""

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def group_name(session_id: int) -> str:
    return f"pad-{session_id}"


def broadcast(session_id: int, kind: str, data: dict) -> None:
    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(group_name(session_id),
                                            {"type": "pad.event", "kind": kind, "data": data})
        except Exception:  # the push is a convenience: the browsers resync on reconnect
            log.exception("could not push %s to session %s", kind, session_id)

    transaction.on_commit(send)
