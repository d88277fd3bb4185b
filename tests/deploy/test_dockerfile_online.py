"""docker/Dockerfile.online (the image built where a registry is reachable, with nothing
but Docker on the server) checked statically: no registry is reachable here, so it is
never built by this suite. Stages, arguments, copied paths and the shell of every RUN are
checked; and no build file names a package index, mirror or registry host."""

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ONLINE = ROOT / "docker" / "Dockerfile.online"
BUILD_FILES = [ONLINE, ROOT / "docker" / "Dockerfile", ROOT / "docker" / "build.sh",
               ROOT / "docker" / "sandbox" / "Dockerfile", ROOT / "docker" / "sandbox" / "build.sh",
               ROOT / "docker" / "debian-mirror.sh", ROOT / ".dockerignore"]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result, pending = [], ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1]  # Docker drops the backslash and the newline
            continue
        text = pending + line
        pending = ""
        keyword, _, rest = text.strip().partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def stages(path: Path) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(base, name, instructions) for every FROM."""
    out = []
    for keyword, rest in instructions(path):
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?: AS (\S+))?", rest, re.IGNORECASE)
            out.append((match.group(1), match.group(2) or "", []))
        elif out:
            out[-1][2].append((keyword, rest))
    return out


def global_args() -> dict[str, str]:
    args = {}
    for keyword, rest in instructions(ONLINE):
        if keyword == "FROM":
            break
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default
    return args


def test_base_images_are_build_arguments_with_registry_free_defaults():
    args = global_args()
    assert set(args) == {"PYTHON_IMAGE", "NODE_IMAGE", "SANDBOX_BASE_IMAGE"}
    for name, image in args.items():
        first = image.split("/")[0]
        # A registry host would be a first part with a dot or a port: none.
        assert "/" not in image or not re.search(r"[.:]", first), (name, image)
    names = set()
    for base, name, _ in stages(ONLINE):
        match = re.fullmatch(r"\$\{(\w+)\}", base)
        assert (match and match.group(1) in args) or base in names, base
        assert name and name not in names, name
        names.add(name)


def test_the_default_target_is_the_web_image_and_sandbox_is_a_target():
    all_stages = stages(ONLINE)
    names = [name for _, name, _ in all_stages]
    assert names[-1] == "web" and "sandbox" in names
    # The web image is the one docker/Dockerfile makes: same user, entrypoint, env, port.
    web = [i for i in all_stages[-1][2] if i[0] in ("ENV", "USER", "EXPOSE", "ENTRYPOINT",
                                                     "CMD", "WORKDIR")]
    offline = [i for i in stages(ROOT / "docker" / "Dockerfile")[-1][2]
               if i[0] in ("ENV", "USER", "EXPOSE", "ENTRYPOINT", "CMD", "WORKDIR")]
    assert web == offline
    keys = ("LABEL", "USER", "CMD", "WORKDIR")
    sandbox = [i for i in all_stages[names.index("sandbox")][2] if i[0] in keys]
    offline_sandbox = [i for i in stages(ROOT / "docker" / "sandbox" / "Dockerfile")[-1][2]
                       if i[0] in keys]
    assert sandbox == offline_sandbox


def _ignored(relative: str) -> bool:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    parts = relative.rstrip("/").split("/")
    return any(fnmatch.fnmatch("/".join(parts[:n]), pattern.removeprefix("**/"))
               or fnmatch.fnmatch(parts[n - 1], pattern.removeprefix("**/"))
               for pattern in patterns for n in range(1, len(parts) + 1))


def test_every_copied_path_exists_and_reaches_the_build_context():
    names = set()
    for _, name, body in stages(ONLINE):
        for keyword, rest in body:
            if keyword != "COPY":
                continue
            words = rest.split()
            if words[0].startswith("--from="):
                assert words[0].removeprefix("--from=") in names, rest
                continue
            for source in words[:-1]:
                assert (ROOT / source).exists(), source
                assert not _ignored(source), source
        names.add(name)
    # The context leaves out the heavy folders.
    for heavy in (".venv", ".venv-runner", "node_modules", ".git", "var",
                  "platform/catalog/__pycache__"):
        assert _ignored(heavy), heavy


def test_every_run_is_valid_shell():
    runs = [rest for keyword, rest in instructions(ONLINE) if keyword == "RUN"]
    assert len(runs) >= 6
    for script in runs:
        result = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        assert result.returncode == 0, (script, result.stderr)


def test_the_bundles_are_built_as_make_builds_them():
    make_flags = re.search(r"esbuild \$< (.*) --outfile", (ROOT / "Makefile").read_text()).group(1)
    assert f'node_modules/.bin/esbuild "$asset" {make_flags}' in ONLINE.read_text()


def test_the_sandbox_build_checks_its_runner_hash():
    text = ONLINE.read_text()
    assert "ARG RUNNER_HASH=unknown" in text
    assert 'if [ "$actual" != "$RUNNER_HASH" ]' in text


@pytest.mark.parametrize("path", BUILD_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_build_file_names_a_host(path):
    """Mirrors and indexes come from the machine's configuration or a build argument."""
    assert not re.search(r"\b[a-z]+://", path.read_text()), path


def test_the_debian_mirror_comes_from_the_setting_or_this_machines_apt(tmp_path):
    script = ROOT / "docker" / "debian-mirror.sh"
    given = subprocess.run(["sh", str(script)], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "OVERLAP_DEBIAN_MIRROR": "http://m/debian"})
    assert given.stdout.strip() == "http://m/debian"
    apt = subprocess.run(["sh", str(script)], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"})
    configured = "".join(p.read_text() for p in Path("/etc/apt").rglob("*")
                         if p.is_file() and p.suffix in (".list", ".sources"))
    configured += Path("/etc/apt/sources.list").read_text() \
        if Path("/etc/apt/sources.list").exists() else ""
    if apt.returncode == 0:
        mirror = apt.stdout.strip()
        assert mirror and mirror in configured and "security" not in mirror
    else:
        assert "OVERLAP_DEBIAN_MIRROR" in apt.stderr
