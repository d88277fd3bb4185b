"""docker/compose.yaml wires the roles of the one image as docs/deploy.md says. The file
is checked as data, and through `docker-compose config` / `docker compose config` where a
compose is installed (no engine needed); tests/deploy/test_image.py runs the same roles
from the image for real."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
REMOTE = ROOT / "docker" / "compose.remote-workers.yaml"
APP_ROLES = ("migrate", "web", "worker", "beat", "gpu-worker")


def _file(path: Path = COMPOSE) -> dict:
    return yaml.safe_load(path.read_text())


def _services() -> dict:
    return _file()["services"]


def test_every_role_runs_from_the_one_image_against_postgres_and_redis():
    services = _services()
    for name in APP_ROLES:
        service = services[name]
        assert service["image"].startswith("${OVERLAP_WEB_IMAGE"), name
        env = service["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://") and "@redis:6379/0" in env["REDIS_URL"]
    assert services["web"]["command"] == ["web"]
    assert services["beat"]["command"] == ["beat"]
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == \
            "service_completed_successfully"


def test_the_project_name_and_the_published_port_come_from_env():
    """Debian's compose 1.29 refuses a top-level `name:`; the name is COMPOSE_PROJECT_NAME."""
    assert "name" not in _file()
    assert set(_file()) <= {"x-app", "services", "volumes"}
    assert _services()["web"]["ports"] == \
        ["${OVERLAP_HTTP_BIND:-127.0.0.1}:${OVERLAP_HTTP_PORT:-8000}:8000"]
    # Only the web is published; PostgreSQL and Redis only with the remote-workers file.
    for name, service in _services().items():
        assert name == "web" or "ports" not in service, name


def test_redis_always_has_a_password_and_every_url_carries_it():
    services = _services()
    redis = services["redis"]
    command = redis["command"]
    assert command[command.index("--requirepass") + 1] == "${REDIS_PASSWORD:?set REDIS_PASSWORD}"
    assert redis["environment"]["REDISCLI_AUTH"].startswith("${REDIS_PASSWORD")
    for name in APP_ROLES:
        env = services[name]["environment"]
        for key in ("REDIS_URL", "CHANNELS_REDIS_URL"):
            assert env[key].startswith("redis://:${REDIS_PASSWORD:?"), (name, key)
        assert env["CHANNELS_REDIS_URL"].endswith("@redis:6379/1")
        # One prefix for the web and every worker, so run updates reach browsers.
        assert env["CHANNELS_PREFIX"] == "${CHANNELS_PREFIX:-overlap}"


def test_remote_workers_get_postgres_and_redis_on_a_private_address_only():
    services = _file(REMOTE)["services"]
    assert set(services) == {"postgres", "redis"}
    for name, port in (("postgres", 5432), ("redis", 6379)):
        (published,) = services[name]["ports"]
        assert published.startswith("${OVERLAP_PRIVATE_ADDRESS:?"), name
        assert published.endswith(f":{port}"), name


DOCKER_SOCKET = "/var/run/docker.sock:/var/run/docker.sock"


def test_only_the_sandbox_daemons_hold_the_docker_socket_and_they_hold_nothing_else():
    services = _services()
    holders = {name for name, service in services.items()
               if DOCKER_SOCKET in service.get("volumes", [])}
    assert holders == {"sandboxd", "authoring-sandboxd", "gpu-sandboxd"}
    for name in holders:
        daemon = services[name]
        assert daemon["command"] == ["sandboxd"]
        assert daemon["network_mode"] == "none"  # reachable only through its socket
        assert "env_file" not in daemon  # no secret key, no database or Redis password
        assert not {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} & set(daemon["environment"])
        assert "sandbox-socket:/run/overlap-sandbox" in daemon["volumes"]
    # Workers run as the image's unprivileged user and reach sandboxes through a daemon.
    for name in ("worker", "authoring-worker", "gpu-worker"):
        worker = services[name]
        assert "user" not in worker, name
        assert worker["environment"]["OVERLAP_SANDBOX"] == "daemon"
        socket_name = Path(worker["environment"]["OVERLAP_SANDBOX_SOCKET"]).name
        served_by = [daemon for daemon in holders
                     if services[daemon]["environment"]["OVERLAP_SANDBOX_SOCKET"].endswith(
                         "/" + socket_name)]
        assert len(served_by) == 1, name
        assert served_by[0] in worker["depends_on"]


def test_authors_and_gpu_work_have_workers_and_daemons_of_their_own():
    services = _services()
    worker, gpu = services["worker"], services["gpu-worker"]
    assert set(worker["environment"]["OVERLAP_QUEUES"].split(",")) == {"default", "recovery"}
    # Authors' validations never take a candidate's slot: a worker of their own, one at a
    # time, its sandboxes (from a daemon of their own) at a lower CPU weight.
    authoring = services["authoring-worker"]
    assert authoring["environment"]["OVERLAP_QUEUES"] == "authoring"
    assert authoring["command"] == ["worker"]
    assert authoring["environment"]["OVERLAP_WORKER_CONCURRENCY"] == "1"
    assert int(services["authoring-sandboxd"]["environment"]["OVERLAP_SANDBOX_CPU_SHARES"]) < 1024
    assert gpu["profiles"] == services["gpu-sandboxd"]["profiles"] == ["gpu"]
    assert gpu["environment"]["OVERLAP_QUEUES"] == "gpu"
    assert services["gpu-sandboxd"]["environment"]["OVERLAP_GPU"] == "all"
    assert "gpu" not in services["worker"].get("profiles", [])


def test_the_documented_docker_env_names_every_variable_the_file_requires():
    docs = (ROOT / "docs" / "deploy.md").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text()))
    assert required == {"POSTGRES_PASSWORD", "REDIS_PASSWORD"}
    for name in required | {"COMPOSE_PROJECT_NAME", "OVERLAP_HTTP_PORT", "OVERLAP_HTTP_BIND",
                            "CHANNELS_PREFIX", "OVERLAP_PRIVATE_ADDRESS"}:
        assert f"{name}=" in docs or f"`{name}`" in docs, name


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                 capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


@pytest.fixture
def project(tmp_path):
    """docker/ as an operator has it: the two files, overlap.env and docker/.env."""
    command = _compose_command()
    if command is None:
        pytest.skip("no docker compose / docker-compose installed")
    for path in (COMPOSE, REMOTE):
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(ROOT / "docker" / "overlap.env.example", tmp_path / "overlap.env")
    (tmp_path / ".env").write_text(
        "COMPOSE_PROJECT_NAME=interviews\nPOSTGRES_PASSWORD=pg-secret\n"
        "REDIS_PASSWORD=redis-secret\nOVERLAP_HTTP_PORT=8123\n")

    def config(*files: str, env: dict | None = None) -> subprocess.CompletedProcess:
        args = [a for name in files for a in ("-f", name)]
        return subprocess.run([*command, *args, "config"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **(env or {})})
    return config


def test_compose_reads_the_file_with_the_documented_env(project):
    result = project("compose.yaml")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    web = config["services"]["web"]
    assert web["ports"] in (["127.0.0.1:8123:8000/tcp"],
                            [{"mode": "ingress", "host_ip": "127.0.0.1", "target": 8000,
                              "published": "8123", "protocol": "tcp"}])
    assert web["environment"]["REDIS_URL"] == "redis://:redis-secret@redis:6379/0"
    assert "redis-secret" in config["services"]["redis"]["command"]


def test_compose_refuses_to_start_without_the_redis_password(project, tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(env_file.read_text().replace("REDIS_PASSWORD=redis-secret\n", ""))
    result = project("compose.yaml")
    assert result.returncode != 0 and "set REDIS_PASSWORD" in result.stderr


def test_compose_publishes_postgres_and_redis_for_remote_workers_on_request(project):
    result = project("compose.yaml", "compose.remote-workers.yaml")
    assert result.returncode != 0 and "OVERLAP_PRIVATE_ADDRESS" in result.stderr
    result = project("compose.yaml", "compose.remote-workers.yaml",
                     env={"OVERLAP_PRIVATE_ADDRESS": "10.0.0.2"})
    assert result.returncode == 0, result.stderr
    assert "10.0.0.2:6379:6379" in result.stdout or "host_ip: 10.0.0.2" in result.stdout
