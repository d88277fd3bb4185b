"""What a worker can say about its sandboxes: which backend runs would use, why the
others cannot, and whether the docker image matches this checkout's runner sources."""

import os

from django.conf import settings


def sandbox_report() -> dict:
    try:
        from runner import sandbox
        from runner.sandbox.image import runner_hash

        problems = sandbox.backend_problems()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    configured = settings.OVERLAP_SANDBOX
    if configured == "auto":
        from runner.sandbox.choice import ISOLATING

        chosen = next((name for name in ISOLATING if problems.get(name) is None),
                      "process" if os.environ.get("OVERLAP_SANDBOX_ALLOW_PROCESS") else "")
    else:
        chosen = configured if problems.get(configured) is None else ""
    report = {"configured": configured, "chosen": chosen, "problems": problems}
    if "daemon" not in (configured, chosen):  # a daemon checks its own image
        report["image"] = _docker_image(runner_hash())
    return report


def _docker_image(expected: str) -> dict:
    from runner.sandbox.backends.docker import image_name

    name = image_name()
    report = {"name": name, "expected_runner_hash": expected}
    try:
        import docker

        client = docker.from_env(timeout=5)
        image = client.images.get(name)
    except Exception as exc:
        return {**report, "present": False, "error": type(exc).__name__}
    label = (image.labels or {}).get("org.overlap.runner-hash", "")
    # The docker backend's own escape hatch: it then grades with a stale image.
    allowed = {"stale_allowed": True} if os.environ.get(
        "OVERLAP_SANDBOX_ALLOW_STALE_IMAGE") == "1" else {}
    return {**report, "present": True, "runner_hash": label, "fresh": label == expected,
            "created": (image.attrs or {}).get("Created", ""), **allowed}
