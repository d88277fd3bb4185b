"""Scale-out: a worker on another machine needs only DATABASE_URL, REDIS_URL and a sandbox
backend. Two worker processes, each in a network namespace this test makes (`ip netns`),
reach PostgreSQL and Redis only through a veth pair on a 10.x address the test creates;
each has its own sandbox pool; both take runs from the one shared queue."""

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

from tests.faults.harness import Stack, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Namespace:
    """`ip netns` namespace joined to this host by a veth pair: host side .1, inside .2."""

    def __init__(self, name: str, subnet: int):
        self.name = name
        self.host_ip, self.inner_ip = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
        self.host_if, self.inner_if = f"ovh{subnet}", f"ovn{subnet}"

    def create(self) -> None:
        self.delete()
        _ip("netns", "add", self.name)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.inner_if)
        _ip("link", "set", self.inner_if, "netns", self.name)
        _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        inside = ("netns", "exec", self.name, "ip")
        _ip(*inside, "addr", "add", f"{self.inner_ip}/30", "dev", self.inner_if)
        _ip(*inside, "link", "set", self.inner_if, "up")
        _ip(*inside, "link", "set", "lo", "up")

    def delete(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)


class Forwarder:
    """PostgreSQL listens on 127.0.0.1 only here: a TCP forwarder on the veth's host address
    plays the database server's network address."""

    def __init__(self, listen: list[str], port: int, target: tuple[str, int]):
        self.listen, self.port, self.target = listen, port, target
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    async def _pipe(self, reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _client(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def _run(self):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._client, self.listen, self.port))
        self.ready.set()
        self.loop.run_forever()
        server.close()

    def start(self):
        self.thread.start()
        assert self.ready.wait(10)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)


@contextlib.contextmanager
def _owner(name: str):
    previous = os.environ.get("OVERLAP_SANDBOX_OWNER")
    os.environ["OVERLAP_SANDBOX_OWNER"] = name
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("OVERLAP_SANDBOX_OWNER", None)
        else:
            os.environ["OVERLAP_SANDBOX_OWNER"] = previous


def test_two_workers_in_their_own_network_namespaces_share_one_queue(tmp_path):
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    stack = Stack(tmp_path)
    if not stack.db.postgres:
        pytest.skip("scale-out across machines needs PostgreSQL (DATABASE_URL)")
    from runner.sandbox.run import get_backend

    if get_backend("docker").problem():
        pytest.skip(f"docker sandbox unavailable: {get_backend('docker').problem()}")

    base = 200 + os.getpid() % 50
    spaces = [Namespace(f"ovl-{os.getpid()}-{i}", base + i) for i in range(2)]
    forwarder = None
    try:
        for space in spaces:
            space.create()
        stack.redis.bind += [space.host_ip for space in spaces]
        stack.redis.start()
        stack.prepare()
        db = urllib.parse.urlparse(stack.db.url)
        forwarder = Forwarder([space.host_ip for space in spaces], 5432,
                              (db.hostname or "127.0.0.1", db.port or 5432))
        forwarder.start()

        # Inside a namespace the host's loopback services are out of reach.
        probe = subprocess.run(
            [*spaces[0].prefix, sys.executable, "-c",
             f"import socket; socket.create_connection(('127.0.0.1', {stack.redis.port}), 2)"],
            capture_output=True)
        assert probe.returncode != 0, "the namespace reached the host's loopback"

        for i, space in enumerate(spaces):
            stack.start_worker(f"remote-{i}", concurrency=1, prefix=space.prefix, extra_env={
                # All a worker on another machine is given:
                "DATABASE_URL": db._replace(netloc=f"{db.username}@{space.host_ip}:5432")
                .geturl(),
                "REDIS_URL": stack.redis.url_for(space.host_ip),
                "OVERLAP_SANDBOX": "docker",
                "OVERLAP_SANDBOX_OWNER": f"remote-{i}",
            })
        stack.start_beat()
        tokens = stack.sessions(6)
        started = time.monotonic()
        stack.click_runs(tokens)
        assert wait_for(stack.all_finished, 300, every=1), (
            stack.runs(), stack.log("remote-0")[-2000:], stack.log("remote-1")[-2000:])
        took = time.monotonic() - started
        assert [r[1] for r in stack.runs()] == ["done"] * 6, stack.runs()
        per_worker = [stack.log(f"remote-{i}").count("Task runs.execute[") // 2
                      for i in range(2)]
        assert all(count >= 1 for count in per_worker), per_worker  # both took work
        print(f"scale-out: 6 runs in {took:.0f} s, per worker {per_worker}")
    finally:
        stack.stop()
        if forwarder:
            forwarder.stop()
        for space in spaces:
            space.delete()
        # A worker stopped while its pool was creating a sandbox can leave that container
        # ("created", never started); on a real machine its successor's reaper removes it
        # (same owner, dead process). These "machines" have no successor: reap here.
        for i in range(2):
            with _owner(f"remote-{i}"):
                get_backend("docker").reap()
