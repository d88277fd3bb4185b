#!/bin/sh
# The roles of the Overlap image:
#   web       the ASGI server (uvicorn) on 0.0.0.0:${PORT:-8000}; static files by whitenoise
#   worker    a Celery worker (queues ${OVERLAP_QUEUES:-default,authoring,recovery}; the GPU profile
#             sets gpu); its sandboxes come from a sandbox daemon (OVERLAP_SANDBOX=daemon)
#   sandboxd  the sandbox daemon: the only role that holds the Docker engine's socket (run
#             as root); answers workers on ${OVERLAP_SANDBOX_SOCKET}, which members of
#             group ${OVERLAP_SANDBOX_GROUP:-10002} (the image's user) may open
#   beat      Celery beat: sends the recovery task every few seconds (run exactly one)
#   migrate   database migrations, then the exercises in /app/exercises (sync_content)
#   manage …  any manage.py command (createsuperuser, check --deploy, …)
set -eu
role=${1:-web}
[ $# -gt 0 ] && shift
case "$role" in
    web)
        # Django under ASGI: no persistent database connections (each request may run in
        # another thread; they would pile up until PostgreSQL refuses clients). The
        # client's address and scheme come from the proxy's headers only as the settings
        # say (OVERLAP_TRUSTED_PROXIES, BEHIND_TLS), never from uvicorn's own guess.
        export DB_CONN_MAX_AGE="${DB_CONN_MAX_AGE:-0}"
        exec python -m uvicorn overlap.asgi:application --host "${HOST:-0.0.0.0}" \
            --port "${PORT:-8000}" --workers "${WEB_WORKERS:-2}" --no-proxy-headers \
            --no-access-log "$@" ;;
    worker)
        exec python -m celery -A overlap worker --loglevel "${LOG_LEVEL:-INFO}" \
            --queues "${OVERLAP_QUEUES:-default,authoring,recovery}" \
            --concurrency "${OVERLAP_WORKER_CONCURRENCY:-$(nproc)}" "$@" ;;
    sandboxd)
        exec python -m runner.sandbox.daemon --group "${OVERLAP_SANDBOX_GROUP:-10002}" "$@" ;;
    beat)
        exec python -m celery -A overlap beat --loglevel "${LOG_LEVEL:-INFO}" \
            --schedule "${OVERLAP_VAR_DIR:-/app/var}/celerybeat-schedule" "$@" ;;
    migrate)
        python manage.py migrate --noinput
        exec python manage.py sync_content ;;
    manage)
        exec python manage.py "$@" ;;
    *)
        exec "$role" "$@" ;;
esac
