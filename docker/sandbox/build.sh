#!/bin/sh
# Build the sandbox image without a container registry.
#
#   docker/sandbox/build.sh [--requirements FILE] [--base IMAGE]
#
# 1. A Debian rootfs from debootstrap (minbase + python3), imported with `docker import`
#    as the base image; skipped when --base names an image that exists (a CUDA PyTorch
#    image in production, pulled or loaded beforehand).
# 2. The wheels runner/requirements.txt needs, fetched on the host with `pip download`
#    (torch comes from pip's find-links, e.g. /opt/wheels).
# 3. docker build of docker/sandbox/Dockerfile, installing with `pip install --no-index`.
# The rootfs and the wheels are cached, so a rebuild after a runner change takes seconds.
#
# Environment: OVERLAP_SANDBOX_IMAGE (default overlap-sandbox:latest), OVERLAP_SANDBOX_CACHE,
# OVERLAP_DEBIAN_MIRROR (default: the Debian archive this machine's apt uses,
# docker/debian-mirror.sh), PYTHON (default python3).
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
image=${OVERLAP_SANDBOX_IMAGE:-overlap-sandbox:latest}
base=""
requirements="$repo/runner/requirements.txt"
python=${PYTHON:-python3}
suite=bookworm
pyver=3.11

while [ $# -gt 0 ]; do
    case "$1" in
        --requirements) requirements=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [ -z "${OVERLAP_SANDBOX_CACHE:-}" ]; then
    if mkdir -p /var/cache/overlap 2>/dev/null && [ -w /var/cache/overlap ]; then
        OVERLAP_SANDBOX_CACHE=/var/cache/overlap/sandbox
    else
        OVERLAP_SANDBOX_CACHE=$repo/var/cache/sandbox
    fi
fi
cache=$OVERLAP_SANDBOX_CACHE
mkdir -p "$cache"

started=$(date +%s)
step() { echo "build.sh [+$(($(date +%s) - started))s]: $*" >&2; }

if ! [ -f "$requirements" ]; then
    echo "build.sh: $requirements is missing: it pins what the sandbox installs" >&2
    exit 1
fi
docker info >/dev/null 2>&1 || {
    echo "build.sh: no Docker engine answers (docker/start-dockerd.sh starts one)" >&2
    exit 1
}

# 1. The base image.
if [ -z "$base" ]; then
    base=overlap-sandbox-base:$suite
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        rootfs_tar=$cache/rootfs-$suite.tar
        if ! [ -f "$rootfs_tar" ]; then
            command -v debootstrap >/dev/null || {
                echo "build.sh: debootstrap is missing (apt-get install -y debootstrap)" >&2
                exit 1
            }
            mirror=$(sh "$repo/docker/debian-mirror.sh")
            step "debootstrap $suite from $mirror"
            rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
            debootstrap --variant=minbase --include=python3,python3-venv,libstdc++6 \
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
elif ! docker image inspect "$base" >/dev/null 2>&1; then
    echo "build.sh: base image $base is not on this engine" >&2
    exit 1
fi

# 2. The wheels, for CPython $pyver on x86_64 glibc (what the Debian base runs).
req_sum=$(sha256sum "$requirements" | cut -c1-16)
wheels=$cache/wheels-$req_sum
if ! [ -f "$wheels/.complete" ]; then
    step "pip download -r $requirements"
    mkdir -p "$wheels"
    "$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
        --python-version "$pyver" --implementation cp --abi "cp$(echo $pyver | tr -d .)" \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        -r "$requirements" -d "$wheels"
    touch "$wheels/.complete"
fi

# 3. The image, from a staged context (wheels hard-linked, runner copied without caches).
context=$(mktemp -d "$cache/context.XXXXXX")
trap 'rm -rf "$context"' EXIT
mkdir "$context/wheels"
cp -l "$wheels"/*.whl "$context/wheels/" 2>/dev/null || cp "$wheels"/*.whl "$context/wheels/"
cp "$requirements" "$context/requirements.txt"
tar -C "$repo" --exclude=__pycache__ --exclude='*.pyc' -cf - runner | tar -C "$context" -xf -
runner_hash=$(cd "$repo" && "$python" -c 'from runner.sandbox.image import runner_hash; print(runner_hash())')
step "docker build $image (runner $runner_hash)"
docker build --quiet -f "$repo/docker/sandbox/Dockerfile" \
    --build-arg BASE_IMAGE="$base" --build-arg RUNNER_HASH="$runner_hash" \
    -t "$image" "$context" >/dev/null
step "built $image"
