"""The sandbox image's identity: which runner sources it was built from."""

import hashlib
from pathlib import Path

DEFAULT_IMAGE = "overlap-sandbox:latest"
RUNNER_DIR = Path(__file__).resolve().parent.parent


def runner_hash(runner_dir: Path = RUNNER_DIR) -> str:
    """A short digest of the runner's Python sources and requirements.

    build.sh stamps it on the image as a label; the docker backend compares it with the
    checkout's to tell a stale image from a current one.
    """
    digest = hashlib.sha256()
    files = sorted(runner_dir.rglob("*.py")) + sorted(runner_dir.glob("requirements*.txt"))
    for path in files:
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(runner_dir).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
