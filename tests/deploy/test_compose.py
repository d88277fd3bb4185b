"""docker/compose.yaml wires the roles of the one image as docs/deploy.md says (the
compose plugin is not installed here, so the file is checked as data; tests/deploy/
test_image.py runs the same roles from the image for real)."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _services() -> dict:
    return yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]


def test_every_role_runs_from_the_one_image_against_postgres_and_redis():
    services = _services()
    for name in ("migrate", "web", "worker", "beat", "gpu-worker"):
        service = services[name]
        assert service["image"].startswith("${OVERLAP_WEB_IMAGE"), name
        env = service["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:")
    assert services["web"]["command"] == ["web"]
    assert services["web"]["ports"] == ["127.0.0.1:8000:8000"]  # only behind the proxy
    assert services["beat"]["command"] == ["beat"]
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == \
            "service_completed_successfully"


def test_workers_drive_the_docker_engine_and_gpu_work_has_its_own_profile_and_queue():
    services = _services()
    worker, gpu = services["worker"], services["gpu-worker"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in worker["volumes"]
    assert set(worker["environment"]["OVERLAP_QUEUES"].split(",")) == \
        {"default", "authoring", "recovery"}
    assert gpu["profiles"] == ["gpu"]
    assert gpu["environment"]["OVERLAP_QUEUES"] == "gpu"
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["driver"] == "nvidia"
    assert "gpu" not in services["worker"].get("profiles", [])
