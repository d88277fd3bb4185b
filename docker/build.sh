#!/bin/sh
# Build Overlap's web/worker image (docker/Dockerfile) without a container registry.
#
#   docker/build.sh [--base IMAGE] [--online]
#
# 1. The base: a Debian trixie rootfs (minbase + python3 3.13 + venv) from debootstrap,
#    imported with `docker import`; skipped when --base names an image (e.g.
#    python:3.12-slim, pulled beforehand or pulled by docker build where a registry is
#    reachable).
# 2. The wheels pyproject.toml pins, fetched on the host with `pip download` for the base's
#    Python (--online: none; pip installs from the index while building instead).
# 3. The app: sources and the static files collected on the host (`make install` built the
#    browser bundles; `manage.py collectstatic`), so the image needs no Node.
# 4. docker build with `pip install --no-index`. The rootfs and the wheels are cached, so a
#    rebuild after a code change takes seconds.
#
# Environment: OVERLAP_WEB_IMAGE (default overlap-web:latest), OVERLAP_APP_CACHE,
# OVERLAP_DEBIAN_MIRROR (default: the Debian archive this machine's apt uses,
# docker/debian-mirror.sh), PYTHON (the host's
# platform interpreter, default .venv/bin/python).
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${OVERLAP_WEB_IMAGE:-overlap-web:latest}
python=${PYTHON:-$repo/.venv/bin/python}
base=""
online=0
suite=trixie
pyver=3.13

while [ $# -gt 0 ]; do
    case "$1" in
        --base) base=$2; shift 2 ;;
        --online) online=1; shift ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [ -z "${OVERLAP_APP_CACHE:-}" ]; then
    if mkdir -p /var/cache/overlap 2>/dev/null && [ -w /var/cache/overlap ]; then
        OVERLAP_APP_CACHE=/var/cache/overlap/app
    else
        OVERLAP_APP_CACHE=$repo/var/cache/app
    fi
fi
cache=$OVERLAP_APP_CACHE
mkdir -p "$cache"
started=$(date +%s)
step() { echo "docker/build.sh [+$(($(date +%s) - started))s]: $*" >&2; }

docker info >/dev/null 2>&1 || {
    echo "docker/build.sh: no Docker engine answers (docker/start-dockerd.sh starts one)" >&2
    exit 1
}
[ -x "$python" ] || { echo "docker/build.sh: $python is missing (make install)" >&2; exit 1; }

# 1. The base image.
if [ -z "$base" ]; then
    base=overlap-app-base:$suite
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        rootfs_tar=$cache/rootfs-$suite.tar
        if ! [ -f "$rootfs_tar" ]; then
            command -v debootstrap >/dev/null || {
                echo "docker/build.sh: debootstrap is missing (apt-get install -y debootstrap)" >&2
                exit 1
            }
            mirror=$(sh "$repo/docker/debian-mirror.sh")
            step "debootstrap $suite from $mirror"
            rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
            debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
                "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
                tail -n 20 "$cache/debootstrap.log" >&2
                rm -rf "$rootfs"
                exit 1
            }
            rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
            tar -C "$rootfs" --numeric-owner -cf "$rootfs_tar.part" .
            mv "$rootfs_tar.part" "$rootfs_tar"
            rm -rf "$rootfs"
        fi
        step "docker import $base"
        docker import "$rootfs_tar" "$base" >/dev/null
    fi
else
    # Another base brings its own Python: ask it which one, for the wheels.
    pyver=$(docker run --rm --entrypoint python3 "$base" -c \
        'import sys; print("%d.%d" % sys.version_info[:2])')
fi

# 2. The wheels.
context=$(mktemp -d "$cache/context.XXXXXX")
trap 'rm -rf "$context"' EXIT
"$python" -c 'import tomllib; print("\n".join(tomllib.load(open("'"$repo"'/pyproject.toml", "rb"))["project"]["dependencies"]))' \
    >"$context/requirements.txt"
mkdir "$context/wheels"
if [ "$online" = 0 ]; then
    req_sum=$( (cat "$context/requirements.txt"; echo "$pyver") | sha256sum | cut -c1-16)
    wheels=$cache/wheels-$req_sum
    if ! [ -f "$wheels/.complete" ]; then
        step "pip download (CPython $pyver)"
        mkdir -p "$wheels"
        "$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
            --python-version "$pyver" --implementation cp \
            --abi "cp$(echo "$pyver" | tr -d .)" --abi abi3 --abi none \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform any \
            -r "$context/requirements.txt" -d "$wheels"
        touch "$wheels/.complete"
    fi
    cp -l "$wheels"/*.whl "$context/wheels/" 2>/dev/null || cp "$wheels"/*.whl "$context/wheels/"
fi

# 3. The app, with its static files collected here.
step "collectstatic"
mkdir -p "$context/app"
(cd "$repo" && SECRET_KEY=build-only-collectstatic-key-never-used-to-sign-anything-0123456789 "$python" manage.py collectstatic \
    --noinput --verbosity 0)
tar -C "$repo" --exclude=__pycache__ --exclude='*.pyc' -cf - manage.py platform runner \
    templates exercises static-collected docker/entrypoint.sh | tar -C "$context/app" -xf -

step "docker build $image (base $base)"
docker build --quiet -f "$repo/docker/Dockerfile" --build-arg BASE_IMAGE="$base" \
    -t "$image" "$context" >/dev/null
step "built $image"
