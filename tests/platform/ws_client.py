"""A WebSocket client for an ASGI application in the same process (asgiref's communicator).

Channels ships one too, but importing `channels.testing` needs daphne, which we don't run.
"""

import json
from urllib.parse import unquote, urlsplit

from asgiref.testing import ApplicationCommunicator


class WebsocketCommunicator(ApplicationCommunicator):
    def __init__(self, application, path: str, headers=None):
        parts = urlsplit(path)
        headers = list(headers or [])
        if not any(name == b"host" for name, _ in headers):
            headers.append((b"host", b"testserver"))  # as a browser always sends one
        scope = {
            "type": "websocket", "path": unquote(parts.path),
            "raw_path": parts.path.encode(), "query_string": parts.query.encode(),
            "headers": headers, "subprotocols": [], "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        super().__init__(application, scope)

    async def connect(self, timeout=3):
        await self.send_input({"type": "websocket.connect"})
        response = await self.receive_output(timeout)
        if response["type"] == "websocket.close":
            return False, response.get("code", 1000)
        return True, None

    async def send_json_to(self, data) -> None:
        await self.send_to(json.dumps(data))

    async def send_to(self, text: str) -> None:
        await self.send_input({"type": "websocket.receive", "text": text})

    async def receive_json_from(self, timeout=3):
        response = await self.receive_output(timeout)
        assert response["type"] == "websocket.send", response
        return json.loads(response["text"])

    async def disconnect(self, code=1000, timeout=3):
        await self.send_input({"type": "websocket.disconnect", "code": code})
        await self.wait(timeout)
