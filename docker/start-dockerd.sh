#!/bin/sh
# Start a Docker engine for the sandbox if none is reachable; safe to call repeatedly.
#
#   docker/start-dockerd.sh          # start (or find) the engine, wait until it answers
#
# CI and `make` call this before building the sandbox image. On a host where Docker
# runs as a service already, it only checks that the engine answers.
set -eu

log=${DOCKERD_LOG:-/var/log/overlap-dockerd.log}
wait_s=${DOCKERD_WAIT_S:-60}

if docker info >/dev/null 2>&1; then
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    echo "start-dockerd: dockerd is not installed (apt-get install -y docker.io)" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "start-dockerd: no engine answers and starting dockerd needs root" >&2
    exit 1
fi
# A stale pid file from a killed engine stops a new one from starting.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
fi
if ! [ -f /var/run/docker.pid ]; then
    nohup dockerd >"$log" 2>&1 &
fi
i=0
while ! docker info >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt "$wait_s" ]; then
        echo "start-dockerd: the engine did not answer within ${wait_s}s; last lines of $log:" >&2
        tail -n 20 "$log" >&2 || true
        exit 1
    fi
    sleep 1
done
