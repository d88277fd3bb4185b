"""Overlap's settings: one module, read from the environment.

Embedded defaults (SQLite in var/, Redis on localhost) make `make run` work on a bare
machine; production sets DATABASE_URL, REDIS_URL, SECRET_KEY, ALLOWED_HOSTS.
"""

import hashlib
import os
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from security.secret_key import secret_key_problem

ROOT = Path(__file__).resolve().parents[2]
VAR_DIR = Path(os.environ.get("OVERLAP_VAR_DIR", ROOT / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)



def secret_key_from_file(path: Path) -> str:
    """The key kept in `path` (0600), generated there once if the file does not exist yet:
    `make run` is then safe without anyone choosing a key, and sessions survive restarts."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(50) + "\n")
    return path.read_text().strip()


SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY and os.environ.get("OVERLAP_SECRET_KEY_FILE"):
    SECRET_KEY = secret_key_from_file(Path(os.environ["OVERLAP_SECRET_KEY_FILE"]))
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Production (DEBUG off) refuses to start without one; "
            "set SECRET_KEY, or DEBUG=1 for local development."
        )
    SECRET_KEY = "insecure-development-key-never-use-in-production"
elif not DEBUG and (_weak_key := secret_key_problem(SECRET_KEY)):
    raise ImproperlyConfigured(
        f"SECRET_KEY is too weak for production: {_weak_key}. Generate one with "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "accounts",
    "content",
    "catalog",
    "qa",
    "interviews",
    "runs",
    "ops",
    "authoring",
    "axes",  # login throttling (wt12b block below)
    "security",
    "monitoring",
    "realtime",
]

MIDDLEWARE = [
    # /healthz, /healthz/live and /metrics, answered whatever Host the request used
    # (monitoring; /metrics still needs its token or a request from this machine).
    "monitoring.middleware.HealthProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Refuses an oversized body by its declared length, before anything reads it.
    "security.middleware.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every view needs a logged-in user unless it says @login_not_required.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # ...and staff pages need a staff group (interviewers, authors) on top.
    "accounts.access.StaffAccessMiddleware",
    # A NUL in a form or a query: refused with a reason (PostgreSQL cannot store it).
    "security.middleware.NulCharacterMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "security.middleware.NoStoreMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "overlap.urls"
WSGI_APPLICATION = "overlap.wsgi.application"
ASGI_APPLICATION = "overlap.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [ROOT / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.roles",
                "runs.context_processors.run_poll",
                "runs.context_processors.gpu_workers",
                "django.template.context_processors.csp",  # csp_nonce, for the editors
            ],
            "builtins": ["content.templatetags.markdown"],
        },
    },
]

if not os.environ.get("DATABASE_URL"):
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # the embedded SQLite default lives here
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'overlap.sqlite3'}",
        # Persistent connections suit a fixed pool of workers (gunicorn, Celery); the
        # development server starts a thread per request, and each would keep one open
        # until PostgreSQL runs out of connections.
        conn_max_age=env_int("DB_CONN_MAX_AGE", 0 if DEBUG else 60),
        conn_health_checks=True,
    )
}
# The ASGI server (a process that imports overlap.asgi) pools; OVERLAP_DB_POOL=0/1 decides
# elsewhere. Never through the environment by default: Celery's prefork processes must
# not inherit a pool (its threads and connections) from their parent.
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool(
    "OVERLAP_DB_POOL", "overlap.asgi" in sys.modules
):
    # The ASGI server runs each request's synchronous code in a thread of its own, and
    # Django's connections belong to a thread: without a pool every request opened a new
    # PostgreSQL connection (a server process) and left it open until it was
    # garbage-collected. Celery's processes and manage.py keep one persistent
    # connection each, as above.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    from psycopg_pool import ConnectionPool

    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env_int("OVERLAP_DB_POOL_SIZE", 8),
        # While the database is down a request waits this long for a connection, then
        # the page says "temporarily unavailable" (a 503) instead of hanging.
        "timeout": float(os.environ.get("OVERLAP_DB_POOL_TIMEOUT", "1.5")),
        # A connection the database dropped (restarted, unreachable) is never handed out.
        "check": ConnectionPool.check_connection,
        # The pool's own reconnection backs off exponentially (1, 2, 4 … s): after a 30 s
        # outage it could wait many seconds more after the database is back. Given up
        # after 2 s, the next request that needs a connection tries again at once.
        "reconnect_timeout": 2.0,
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A server that does not answer (a network cut, not a refusal) fails in seconds, not
    # after the operating system's TCP time-out (minutes).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("OVERLAP_DB_CONNECT_TIMEOUT", 2))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Many writers on one machine (web threads, worker processes): WAL lets readers go on
    # while one writes, a writer waits for the lock instead of failing at once, and every
    # transaction takes the write lock when it begins (IMMEDIATE), so two transactions can
    # never deadlock upgrading their read locks ("database is locked").
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("OVERLAP_SQLITE_TIMEOUT", 30),
    })
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Argon2id first (accounts/hashers.py: OWASP's parameters, a check costs ~30 ms); the
# others only read hashes stored before, each re-stored as Argon2 at its next login.
PASSWORD_HASHERS = [
    "accounts.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "catalog:exercise_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = ROOT / "static-collected"
# Front-end packages come from npm (package.json) and are served from node_modules.
NODE_MODULES = ROOT / "node_modules"


def existing_static_dirs(entries: list) -> list:
    """The entries (a folder, or a (prefix, folder) pair) whose folder exists. The
    production image has no node_modules/ or static-build/: it serves the files collected
    when it was built (STATIC_ROOT), and a missing folder would only make `check --deploy`
    warn (staticfiles.W004)."""
    return [entry for entry in entries
            if Path(entry[1] if isinstance(entry, tuple) else entry).is_dir()]


STATICFILES_DIRS = existing_static_dirs([
    ROOT / "platform" / "overlap" / "static",
    ROOT / "static-build",  # bundles built by `make` from npm packages (the code editor)
    ("vendor/htmx", NODE_MODULES / "htmx.org" / "dist"),
    ("vendor/pico", NODE_MODULES / "@picocss" / "pico" / "css"),
])
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}


# Content as data: exercises/<slug>/ and exercises/question-banks/*.yaml
EXERCISES_DIR = Path(os.environ.get("OVERLAP_EXERCISES_DIR", ROOT / "exercises"))

# Runs: limits the web app enforces before anything reaches a sandbox.
OVERLAP_MAX_CODE_BYTES = env_int("OVERLAP_MAX_CODE_BYTES", 64 * 1024)
OVERLAP_RUNS_PER_MINUTE = env_int("OVERLAP_RUNS_PER_MINUTE", 10)
# A candidate's page polls a run in progress this often (ms) as a fallback: the pad's
# socket pushes each change of the run's status, and the page fetches it at once.
OVERLAP_RUN_POLL_MS = env_int("OVERLAP_RUN_POLL_MS", 500)
OVERLAP_RUN_REQUEUE_AFTER = env_int("OVERLAP_RUN_REQUEUE_AFTER", 30)  # seconds queued
OVERLAP_RUN_MAX_ATTEMPTS = env_int("OVERLAP_RUN_MAX_ATTEMPTS", 2)
OVERLAP_GRADE_SEEDS = env_int("OVERLAP_GRADE_SEEDS", 20)
# Which sandbox runs candidate code: auto (docker, else bwrap), docker, bwrap, or process
# (NOT isolated: local trial only, and only with OVERLAP_SANDBOX_ALLOW_PROCESS=1).
OVERLAP_SANDBOX = os.environ.get("OVERLAP_SANDBOX", "auto")
OVERLAP_GPU = os.environ.get("OVERLAP_GPU", "")  # "", "all", or device ids "0,1"
OVERLAP_GPU_TASK_TIME_LIMIT = env_int("OVERLAP_GPU_TASK_TIME_LIMIT", 300)
# A GPU run still queued this long with no GPU worker online is answered "Needs a GPU".
OVERLAP_GPU_QUEUE_WAIT_SECONDS = env_int("OVERLAP_GPU_QUEUE_WAIT_SECONDS", 60)

# The live pad (interviews/pad.py, realtime/): bounds on what a browser may send.
OVERLAP_PAD_MESSAGE_BYTES = env_int("OVERLAP_PAD_MESSAGE_BYTES", 256 * 1024)
OVERLAP_PAD_UPDATES_PER_10S = env_int("OVERLAP_PAD_UPDATES_PER_10S", 200)
# What a connection may ask of the history per 10 s: a pull costs 1 plus 1 per 100 updates
# it returns (a pull of a long history is not a keystroke).
OVERLAP_PAD_PULL_BUDGET_PER_10S = env_int("OVERLAP_PAD_PULL_BUDGET_PER_10S", 30)
# Open pad sockets per candidate link, and per interviewer and session, in one web process.
OVERLAP_PAD_SOCKETS_PER_CLIENT = env_int("OVERLAP_PAD_SOCKETS_PER_CLIENT", 4)
OVERLAP_PAD_QUOTA_BYTES = env_int("OVERLAP_PAD_QUOTA_BYTES", 4 * 1024 * 1024)
# The candidate's link stops working this many hours after the session ended.
OVERLAP_CANDIDATE_LINK_HOURS = env_int("OVERLAP_CANDIDATE_LINK_HOURS", 72)

# Celery, fed through Redis. JSON only; every task has explicit limits.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 120)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 100)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # a worker waits out a Redis restart
# A message a killed worker held comes back after the visibility timeout: longer than the
# longest task (so a slow run is never delivered twice while it runs), not Redis' 1 h
# default. Jobs whose worker died are retried sooner anyway (heartbeat, overlap/jobs.py).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int(
        "OVERLAP_BROKER_VISIBILITY_TIMEOUT",
        max(CELERY_TASK_TIME_LIMIT, OVERLAP_GPU_TASK_TIME_LIMIT) + 60),
    "socket_connect_timeout": 5,
}
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = 5
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# The job lifecycle (overlap/jobs.py) and Celery beat's recovery.
OVERLAP_JOB_HEARTBEAT_S = env_int("OVERLAP_JOB_HEARTBEAT_S", 10)
OVERLAP_JOB_DEAD_AFTER_S = env_int("OVERLAP_JOB_DEAD_AFTER_S", 45)
OVERLAP_RECOVER_EVERY_S = env_int("OVERLAP_RECOVER_EVERY_S", 10)
CELERY_BEAT_SCHEDULE = {
    "recover-jobs": {
        "task": "overlap.recover",
        "schedule": OVERLAP_RECOVER_EVERY_S,
        # Its own queue: never behind a backlog of runs (a worker takes from each queue in
        # turn). A backlog of stale recoveries (no worker for a while) is dropped.
        "options": {"queue": "recovery", "expires": 3 * OVERLAP_RECOVER_EVERY_S},
    },
}

# Django Channels: pushes between ASGI processes go through Redis publish/subscribe (a
# keystroke costs one PUBLISH; a browser that misses one resyncs by version). Pub/sub
# names ignore Redis database numbers, so the prefix keeps installations sharing one
# Redis apart.
CHANNELS_REDIS_URL = os.environ.get("CHANNELS_REDIS_URL", REDIS_URL)
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [CHANNELS_REDIS_URL],
            "prefix": os.environ.get("CHANNELS_PREFIX", "overlap-" + hashlib.sha256(
                f"{os.environ.get('DATABASE_URL', VAR_DIR)}|{CHANNELS_REDIS_URL}".encode()
            ).hexdigest()[:10]),
        },
    }
}

# E-mail (invitations), through Django 6.1's MAILERS: SMTP when EMAIL_HOST names a
# server, else the console (`make run` prints the message; DEBUG on or off, an invitation
# never fails for want of a mail server nobody configured).
MAILERS = {
    "default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
    if not os.environ.get("EMAIL_HOST") else {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": os.environ.get("EMAIL_HOST", "localhost"),
            "port": env_int("EMAIL_PORT", 25),
            "username": os.environ.get("EMAIL_USER", ""),
            "password": os.environ.get("EMAIL_PASSWORD", ""),
            "use_tls": env_bool("EMAIL_USE_TLS"),
        },
    }
}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "interviews@localhost")


# --- Hardening and observability (issue #12, wt12b) -------------------------------------
# Everything below is about running Overlap for real: TLS, cookies, CSP, login throttling,
# request size limits, health checks, metrics and logs. Variables are listed in README.md.
BEHIND_TLS = env_bool("BEHIND_TLS")  # a TLS-terminating proxy sets X-Forwarded-Proto
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS else None
SECURE_SSL_REDIRECT = BEHIND_TLS
# Probes and scrapers inside the deployment talk plain HTTP to the web container.
SECURE_REDIRECT_EXEMPT = [r"^healthz(/live)?$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000) if BEHIND_TLS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = BEHIND_TLS
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = False  # htmx reads it to send X-CSRFToken
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"


def _websocket_sources(hosts: list[str]) -> list[str]:
    """ws/wss sources for the live pad on every allowed host (any port). CSP Level 3
    browsers already match same-origin WebSockets with 'self'; older ones need these."""
    sources = []
    for host in hosts:
        if host == "*" or not host or host.startswith("[") or ":" in host:
            continue  # CSP host sources cannot name an IPv6 literal: 'self' covers it
        host = "*" + host if host.startswith(".") else host
        sources += [f"wss://{host}:*"] + ([] if BEHIND_TLS else [f"ws://{host}:*"])
    return sources


# No inline script, no eval, nothing from another origin: templates load static files.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    # The code editors (CodeMirror) add their theme as a <style> carrying the nonce.
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF, *_websocket_sources(ALLOWED_HOSTS)],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Login throttling (django-axes): failed logins are counted per username *and* client
# address in the database (shared by every web process); a locked-out pair waits.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = env_int("OVERLAP_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("OVERLAP_LOGIN_COOLOFF_MINUTES", 15))
# Locked when one username fails too often from one address, or when one address fails
# too often whatever the usernames (a sweep of many accounts, one try each).
AXES_LOCKOUT_PARAMETERS = ["ip_address", ["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "accounts.throttle.client_ip"
# How many proxies append to X-Forwarded-For in front of the web server (the client's
# address is that many entries from the right); 0 trusts only the socket's address.
OVERLAP_TRUSTED_PROXIES = env_int("OVERLAP_TRUSTED_PROXIES", 1 if BEHIND_TLS else 0)

# Request sizes: a declared Content-Length above the limit is refused (413) before the
# body is read. The authoring zip import has its own, larger limit.
OVERLAP_MAX_REQUEST_BYTES = env_int("OVERLAP_MAX_REQUEST_BYTES", 1024 * 1024)
OVERLAP_MAX_IMPORT_BYTES = env_int("OVERLAP_MAX_IMPORT_BYTES", 2 * 1024 * 1024 + 64 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = OVERLAP_MAX_REQUEST_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # bigger uploads are spooled to a temporary file
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000

# Observability: /healthz (database, Redis, a recent Celery worker heartbeat), /metrics
# (Prometheus; from localhost, or anywhere with the bearer token) and the admin's
# system status page.
OVERLAP_METRICS_TOKEN = os.environ.get("OVERLAP_METRICS_TOKEN", "")
OVERLAP_HEARTBEAT_SECONDS = env_int("OVERLAP_HEARTBEAT_SECONDS", 15)
OVERLAP_WORKER_STALE_SECONDS = env_int("OVERLAP_WORKER_STALE_SECONDS", 60)
OVERLAP_HEALTH_NEEDS_WORKER = env_bool("OVERLAP_HEALTH_NEEDS_WORKER", True)

# Logs: plain text, or one JSON object a line (LOG_FORMAT=json). Candidate tokens are
# redacted from every record; records from a run's execution carry its run_id.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact_tokens": {"()": "security.logs.RedactCandidateTokens"},
        "run_context": {"()": "security.logs.RunContext"},
    },
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "security.logs.JsonLines",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(run_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["redact_tokens", "run_context"],
            "formatter": "json" if LOG_FORMAT == "json" else "text",
        },
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
# --- end of the hardening and observability block ---------------------------------------
