"""Overlap's settings: one module, read from the environment.

Embedded defaults (SQLite in var/, Redis on localhost) make `make run` work on a bare
machine; production sets DATABASE_URL, REDIS_URL, SECRET_KEY, ALLOWED_HOSTS.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

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
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every view needs a logged-in user unless it says @login_not_required.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
STATICFILES_DIRS = [
    ROOT / "platform" / "overlap" / "static",
    ROOT / "static-build",  # bundles built by `make` from npm packages (the code editor)
    ("vendor/htmx", NODE_MODULES / "htmx.org" / "dist"),
    ("vendor/pico", NODE_MODULES / "@picocss" / "pico" / "css"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads it to send X-CSRFToken
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS") else None
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("BEHIND_TLS")

# Content as data: exercises/<slug>/ and exercises/question-banks/*.yaml
EXERCISES_DIR = Path(os.environ.get("OVERLAP_EXERCISES_DIR", ROOT / "exercises"))

# Runs: limits the web app enforces before anything reaches a sandbox.
OVERLAP_MAX_CODE_BYTES = env_int("OVERLAP_MAX_CODE_BYTES", 64 * 1024)
OVERLAP_RUNS_PER_MINUTE = env_int("OVERLAP_RUNS_PER_MINUTE", 10)
OVERLAP_RUN_REQUEUE_AFTER = env_int("OVERLAP_RUN_REQUEUE_AFTER", 30)  # seconds queued
OVERLAP_RUN_MAX_ATTEMPTS = env_int("OVERLAP_RUN_MAX_ATTEMPTS", 2)
OVERLAP_GRADE_SEEDS = env_int("OVERLAP_GRADE_SEEDS", 20)
# Which sandbox runs candidate code: auto (docker, else bwrap), docker, bwrap, or process
# (NOT isolated: local trial only, and only with OVERLAP_SANDBOX_ALLOW_PROCESS=1).
OVERLAP_SANDBOX = os.environ.get("OVERLAP_SANDBOX", "auto")
OVERLAP_GPU = os.environ.get("OVERLAP_GPU", "")  # "", "all", or device ids "0,1"
OVERLAP_GPU_TASK_TIME_LIMIT = env_int("OVERLAP_GPU_TASK_TIME_LIMIT", 300)

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
