"""The configuration every sandbox container gets (checked without an engine)."""

import pytest

pytest.importorskip("docker")

from runner.sandbox.backends.docker import container_options
from runner.sandbox.limits import Limits


def test_every_container_is_hardened():
    limits = Limits(memory_mib=512, processes=32, cpus=1.5, disk_mib=8)
    options = container_options(limits, None, expires=0)
    assert options["network_mode"] == "none"
    assert options["read_only"] is True
    assert options["cap_drop"] == ["ALL"]
    assert options["security_opt"] == ["no-new-privileges"]
    assert options["privileged"] is False
    # The trusted side is uid 0 with the three capabilities it needs to start and kill
    # the candidate's processes under their own uid, and nothing else.
    assert options["user"] == "0:0"
    assert sorted(options["cap_add"]) == ["KILL", "SETGID", "SETUID"]
    assert options["mem_limit"] == options["memswap_limit"] == 512 * 2**20
    assert options["pids_limit"] == 32
    assert options["nano_cpus"] == 1_500_000_000
    assert "size=9437184" in options["tmpfs"]["/tmp"]
    ulimits = {u["Name"]: u["Hard"] for u in options["ulimits"]}
    assert ulimits["fsize"] == 8 * 2**20
    assert ulimits["nofile"] == 256
    assert "volumes" not in options and "mounts" not in options
    assert not {"SECRET_KEY", "DATABASE_URL"} & set(options["environment"])


def test_an_authors_worker_gives_its_sandboxes_less_cpu_weight(monkeypatch):
    assert "cpu_shares" not in container_options(Limits(), None, expires=0)
    monkeypatch.setenv("OVERLAP_SANDBOX_CPU_SHARES", "256")
    assert container_options(Limits(), None, expires=0)["cpu_shares"] == 256


def test_without_a_gpu_no_device_is_requested():
    assert "device_requests" not in container_options(Limits(), None, expires=0)


def test_a_gpu_run_requests_all_gpus_or_the_named_ones():
    (every,) = container_options(Limits(), "all", expires=0)["device_requests"]
    assert every["Count"] == -1
    assert every["Capabilities"] == [["gpu"]]
    (named,) = container_options(Limits(), ["0", "2"], expires=0)["device_requests"]
    assert named["DeviceIDs"] == ["0", "2"]
