"""Settings, all from environment variables with defaults that work on one machine.

See the README's "Configuration" section for every variable.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


DATA_DIR = Path(os.environ.get("INSPECTOR_DATA_DIR") or BASE_DIR / "data").resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _persistent_secret(filename: str, env_name: str, make) -> str:
    """Use the env var when set; otherwise generate once and keep it in the data folder."""
    value = os.environ.get(env_name)
    if value:
        return value
    path = DATA_DIR / filename
    if not path.exists():
        # Written whole under a temporary name, then linked into place: two processes starting
        # at once never write two different keys, nor read a file the other has not filled yet.
        fd, temporary = tempfile.mkstemp(dir=DATA_DIR, prefix=f".{filename}.")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(make())
            os.link(temporary, path)
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links: create it exclusively, then fill it
            try:
                with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
                    fh.write(make())
            except FileExistsError:
                pass
        finally:
            os.unlink(temporary)
    for _ in range(50):  # on the fallback path another process may still be filling it
        if value := path.read_text().strip():
            return value
        time.sleep(0.1)
    raise RuntimeError(f"{path} is empty: delete it and start again")


SECRET_KEY = _persistent_secret("secret_key", "SECRET_KEY", lambda: secrets.token_urlsafe(50))


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


# Comma-separated Fernet keys; the first encrypts, all decrypt (rotation).
FIELD_ENCRYPTION_KEYS = [
    k.strip()
    for k in _persistent_secret("field_encryption_key", "FIELD_ENCRYPTION_KEY", _fernet_key).split(",")
    if k.strip()
]

DEBUG = _env_bool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h.strip()]

# The address the run command serves the app on, and the separate origin for widget sandboxes.
# A different *host name* (not only port) keeps the inspector's cookies away from widgets.
PUBLIC_URL = os.environ.get("PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
SANDBOX_ORIGIN = os.environ.get("SANDBOX_ORIGIN", "http://localhost:8001").rstrip("/")
CSRF_TRUSTED_ORIGINS = [PUBLIC_URL]
# Extra image sources for the app's Content-Security-Policy (images: the app and data: only).
CSP_IMG_SRC = os.environ.get("CSP_IMG_SRC", "").replace(",", " ").split()

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "inspector",
    "tools",
    "chat",
    "evals",
    "review",
]

MIDDLEWARE = [
    "inspector.middleware.TraceMiddleware",
    "inspector.middleware.ContentSecurityPolicyMiddleware",
    "inspector.middleware.SandboxHostMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "inspector.middleware.TokenAuthMiddleware",
    "inspector.roles.ViewerReadOnlyMiddleware",
    "inspector.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "inspector.urls"
ASGI_APPLICATION = "inspector.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "inspector.roles.role_context",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", "")
# Connections each process may hold in its PostgreSQL pool (web and every worker process).
DB_POOL_MIN = _env_int("DB_POOL_MIN", 1)
DB_POOL_MAX = _env_int("DB_POOL_MAX", 12)


def _prepare_threshold(value: str) -> int | None:
    """DB_PREPARE_THRESHOLD: a count, `off` (None: psycopg prepares nothing), or unset (5)."""
    value = value.strip().lower()
    return None if value in ("off", "none") else int(value) if value else 5


# Runs of one statement on a connection after which PostgreSQL keeps it prepared; `off` for a
# pooler that cannot carry prepared statements (PgBouncer in transaction mode before 1.21).
DB_PREPARE_THRESHOLD = _prepare_threshold(os.environ.get("DB_PREPARE_THRESHOLD", ""))
# Threads a web process keeps between requests, each lent to one request at a time with its
# database connection (inspector/asgi_handler.py); a burst beyond them makes threads that end after.
WEB_REQUEST_THREADS = _env_int("WEB_REQUEST_THREADS", 16)


def _process_role() -> str:
    """daphne, celery, pytest, manage.py…: the program this process runs."""
    program = Path(sys.argv[0] if sys.argv and sys.argv[0] else "python")
    return program.parent.name if program.name == "__main__.py" else program.name


def _database(url: str) -> dict:
    """One database setting, with the options the app needs whichever way it is configured.

    SQLite always gets WAL, IMMEDIATE transactions and a busy timeout (without them a worker
    and the web process fail with "database is locked" under ordinary use), however the file
    was named. PostgreSQL gets psycopg 3's connection pool: a bounded number of connections
    per process, reused across requests and Celery tasks, each checked before it is handed out.
    """
    if url:
        db = dj_database_url.parse(url)
    else:
        db = {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "inspector.sqlite3"}
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = Path(db["NAME"]) if db.get("NAME") not in (None, "", ":memory:") else DATA_DIR / "inspector.sqlite3"
        db["NAME"] = name
        # A file, not :memory:, so a Celery worker in another process sees the test database.
        db.setdefault("TEST", {})["NAME"] = name.with_name(f"test-{name.name}")
        db["OPTIONS"] = {
            **db.get("OPTIONS", {}),
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            # WAL lets the web process read while a worker writes.
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        # Each thread keeps its connection: daphne's kept request threads (inspector/asgi_handler.py)
        # and the worker's. A connect with its PRAGMAs cost ~0.8 ms of CPU per request or task.
        db["CONN_MAX_AGE"] = None
    elif db["ENGINE"] == "django.db.backends.postgresql":
        db["OPTIONS"] = {
            **db.get("OPTIONS", {}),
            "pool": {
                "min_size": DB_POOL_MIN,
                "max_size": max(DB_POOL_MAX, DB_POOL_MIN),
                "timeout": 20,  # waiting for a free connection longer than this is an error, not a hang
                "max_idle": 300,
            },
            # Parameters bound on the server, and a statement run 5 times on a connection prepared
            # there: PostgreSQL then plans it once per connection, not on every run. Planning was
            # most of PostgreSQL's CPU per tool call (pg_stat_statements under bench/hot_path.py:
            # ~2.2 ms of planning to ~1 ms of execution per call; the token lookup and the call's
            # reads each planned ~0.4 ms); PostgreSQL's CPU per call went 4.7 -> 2.4 ms. The pooled
            # connections live on, and with them their prepared statements.
            "server_side_binding": True,
            "prepare_threshold": DB_PREPARE_THRESHOLD,
            # Shows which process holds which connection in pg_stat_activity.
            "application_name": f"mcp-inspector:{_process_role()}:{os.getpid()}"[:63],
        }
        # Django returns a pooled connection at the end of each request or task; persistent
        # connections on top of a pool are refused by Django. Health checks make the pool
        # check a connection before handing it out (a restarted PostgreSQL costs no request).
        db["CONN_MAX_AGE"] = 0
        db["CONN_HEALTH_CHECKS"] = True
        # Django's backend with batches that fit PostgreSQL's 65,535 parameters a statement (bound on the server).
        db["ENGINE"] = "inspector.postgresql"
    return db


DATABASES = {"default": _database(DATABASE_URL)}
if os.environ.get("INSPECTOR_DB_NAME"):
    # Used by the test suite to point a worker subprocess at the test database.
    DATABASES["default"]["NAME"] = os.environ["INSPECTOR_DB_NAME"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# The test launcher (`make test`) sets this: a password hashed a million times costs ~0.2 s, and
# every test creates users. Never set it for a real deployment.
if _env_bool("TEST_FAST_PASSWORD_HASHING", False):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", "django.contrib.auth.hashers.PBKDF2PasswordHasher"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# TLS ends at a proxy in front (README "Running for a team"): cookies are sent over https only,
# and with TRUST_PROXY_HEADERS the proxy's X-Forwarded-Proto tells Django a request was https.
# Trust that header only behind a proxy that sets it (a client could send it to daphne directly).
if PUBLIC_URL.startswith("https://"):
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
if _env_bool("TRUST_PROXY_HEADERS", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Redis: Celery broker and result backend, and the Channels layer -------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
# A per-run key prefix isolates test runs that share one Redis server.
REDIS_PREFIX = os.environ.get("REDIS_PREFIX", "")

CHANNEL_LAYERS = {
    "default": {
        # channels_redis's, skipping groups nobody is in at one round trip (inspector/channel_layer.py).
        "BACKEND": "inspector.channel_layer.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 defaults to a 5 s socket timeout, the same as channels_redis's blocking
            # read: idle sockets then time out and drop. Give reads room.
            "hosts": [{"address": REDIS_URL or "redis://127.0.0.1:6379/0", "socket_timeout": 30}],
            "prefix": f"{REDIS_PREFIX}asgi",
            "capacity": 1000,
            "expiry": 60,
        },
    }
}

CELERY_BROKER_URL = REDIS_URL or "redis://127.0.0.1:6379/0"
# Kombu's Redis transport with the fix that keeps a worker alive when Redis restarts under a
# running call (inspector/broker.py).
if urlsplit(CELERY_BROKER_URL).scheme in {"redis", "rediss"}:
    CELERY_BROKER_TRANSPORT = "inspector.broker:Transport"
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Celery closes the task thread's database connections before and after every task unless
    # told to reuse them (then every 2 × this many): on SQLite each task opened one again, with its
    # PRAGMAs and Django's SQL functions (py-spy: ~2.5% of the worker's Python time per call).
    # PostgreSQL's come from the process's pool, checked before use: a closed one is a checkout.
    CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "tools.tasks.*": {"queue": "tools"},
    "chat.tasks.*": {"queue": "llm"},
}
CELERY_WORKER_QUEUES = "default,tools,llm"
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {}
if REDIS_PREFIX:
    CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = REDIS_PREFIX
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS["global_keyprefix"] = REDIS_PREFIX
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- MCP --------------------------------------------------------------------------------
MCP_CONNECT_TIMEOUT = _env_float("MCP_CONNECT_TIMEOUT", 15.0)
# The default call timeout (a server's own default and a per-call override replace it), and the
# hard maximum no call outlives: no override above it, and no progress notification extends past it.
MCP_CALL_TIMEOUT = _env_float("MCP_CALL_TIMEOUT", 60.0)
MCP_MAX_CALL_TIMEOUT = _env_float("MCP_MAX_CALL_TIMEOUT", 3600.0)
MCP_IDLE_TIMEOUT = _env_float("MCP_IDLE_TIMEOUT", 300.0)
# The sweep (tools/runtime/sweep.py) that ends every call: how often it runs in a worker, when a queued
# call's task is sent again, and how long a call may wait for a worker before it fails.
SWEEP_INTERVAL = _env_float("SWEEP_INTERVAL", 15.0)
CALL_RESEND_AFTER = _env_float("CALL_RESEND_AFTER", 30.0)
CALL_QUEUE_DEADLINE = _env_float("CALL_QUEUE_DEADLINE", 300.0)
# A running call's lease (its deadline_at) is connect + its timeout + this margin, pushed on by
# progress; past it the sweep acts.
CALL_LEASE_MARGIN = _env_float("CALL_LEASE_MARGIN", 30.0)
# A message of a call still running must not be handed to another worker by the broker.
CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = max(
    3600, int(MCP_CONNECT_TIMEOUT + MCP_MAX_CALL_TIMEOUT + CALL_LEASE_MARGIN)
)
# The web process waits this long for a worker to answer an inspector request.
MCP_WEB_WAIT = _env_float("MCP_WEB_WAIT", MCP_CONNECT_TIMEOUT + MCP_CALL_TIMEOUT + 5)
# The longest `POST …/call/?wait=` a script may ask for (the call goes on after it; the answer is then a 202).
CALL_WAIT_MAX = _env_float("CALL_WAIT_MAX", 300)
# Suggestions under a prompt argument or a template variable: asked while the user types.
COMPLETION_TIMEOUT = _env_float("COMPLETION_TIMEOUT", 5)

# The JWT bearer grant (workload identity, tools/runtime/oauth.py) may read a server's assertion from
# a file only under this directory (e.g. /var/run/secrets/tokens, where a projected token is
# mounted); unset, no file is read: a server's settings must not make a worker send any file it can read.
WORKLOAD_TOKEN_DIR = os.environ.get("INSPECTOR_WORKLOAD_TOKEN_DIR", "")

# Multi round-trip input (2026-07-28; tools/runtime/input_rounds.py): a call that asks for input rests
# until someone answers, at most MCP_INPUT_TIMEOUT seconds per round; a server may ask at most
# MCP_INPUT_MAX_ROUNDS times in one call, with a requestState of at most MCP_INPUT_STATE_MAX_BYTES.
MCP_INPUT_TIMEOUT = _env_float("MCP_INPUT_TIMEOUT", 900.0)
MCP_INPUT_MAX_ROUNDS = _env_int("MCP_INPUT_MAX_ROUNDS", 10)
MCP_INPUT_STATE_MAX_BYTES = _env_int("MCP_INPUT_STATE_MAX_BYTES", 256 * 1024)

# A server's sampling/createMessage carrying more text than this is refused with a clear
# message (tools/runtime/server_requests/): it would not fit a model, nor a page.
SAMPLING_MAX_CHARS = _env_int("SAMPLING_MAX_CHARS", 100_000)

# A JSON-RPC frame larger than this is logged as a preview (its size kept): the full tool
# result is stored once, with its tool call.
RPC_FRAME_MAX_BYTES = _env_int("RPC_FRAME_MAX_BYTES", 64 * 1024)
# A `tool_call.result` event carries the full result inline when its stored JSON is at most
# this big (nearly every result); above it, only a reference the page streams over HTTP.
# Kept well under daphne's 1 MiB WebSocket frame limit, the summary rides along.
WS_INLINE_RESULT_MAX_BYTES = _env_int("WS_INLINE_RESULT_MAX_BYTES", 512 * 1024)
# Pages that show a full result (the admin's tool call, its replay diffs) show at most this
# much of it, with its size and a streamed download: a 40 MB result made a 42 MB admin page.
RESULT_PREVIEW_BYTES = _env_int("RESULT_PREVIEW_BYTES", 256 * 1024)

# --- Projection and chat ----------------------------------------------------------------
PROJECTION_TOKEN_CAP = _env_int("PROJECTION_TOKEN_CAP", 8000)
# A large result's structuredContent above this size is not checked against the tool's
# outputSchema: checking needs it as Python objects, some ten times its size in the worker.
OUTPUT_SCHEMA_CHECK_MAX_BYTES = _env_int("OUTPUT_SCHEMA_CHECK_MAX_BYTES", 8 * 1024 * 1024)
# Tokens are counted with litellm's tokenizer for the conversation's model; calls outside a
# conversation (manual, widget, replay) are counted as this model's (tools/mcp/tokens.py).
TOKEN_COUNT_MODEL = os.environ.get("TOKEN_COUNT_MODEL", "").strip() or "gpt-4o-mini"
CHAT_MAX_STEPS = _env_int("CHAT_MAX_STEPS", 10)
# The largest conversation export file an import accepts (chat/archive.py).
REPLAY_IMPORT_MAX_BYTES = _env_int("REPLAY_IMPORT_MAX_BYTES", 64 * 1024 * 1024)
# A live replay (chat/live.py) gives up on a turn that has not ended after this long.
REPLAY_LIVE_TURN_TIMEOUT = _env_float("REPLAY_LIVE_TURN_TIMEOUT", 600.0)
LLM_TIMEOUT = _env_float("LLM_TIMEOUT", 120.0)
# Evals (evals/runs.py): attempts running at once per provider within a run (a run may ask for
# fewer), the most repeats of a case, and how long one turn of an attempt may run.
EVALS_CONCURRENCY_PER_PROVIDER = _env_int("EVALS_CONCURRENCY_PER_PROVIDER", 4)
EVALS_MAX_REPEAT = _env_int("EVALS_MAX_REPEAT", 50)
EVALS_TURN_TIMEOUT = _env_float("EVALS_TURN_TIMEOUT", 600.0)
# A running eval run whose advance has not run for this long (its worker died) is sent again by
# the sweep; an attempt whose grading was lost is graded again after EVALS_REGRADE_SECONDS.
EVALS_STALL_SECONDS = _env_float("EVALS_STALL_SECONDS", 30.0)
EVALS_REGRADE_SECONDS = _env_float("EVALS_REGRADE_SECONDS", 120.0)
# A step's lease is LLM_TIMEOUT + this margin after its claim (or its last streamed beat): past
# it, the step's worker is presumed dead and the sweep sends the step again (chat/agent.py).
LLM_STEP_LEASE_MARGIN = _env_float("LLM_STEP_LEASE_MARGIN", 60.0)
# Fault tests only (tests/faults/test_worker_killed_before_chord.py): seconds a worker waits
# between storing a step that asked for tools and scheduling their chord, a window to kill it in.
FAULT_PAUSE_BEFORE_CHORD = _env_float("FAULT_PAUSE_BEFORE_CHORD", 0.0)

# --- Team sign-in: OpenID Connect (inspector/oidc.py, mozilla-django-oidc) -----------------
# Off unless OIDC_ISSUER is set. Endpoints and the signing algorithm come from the issuer's
# /.well-known/openid-configuration; the client secret comes from the environment only and is
# sent only to the token endpoint. Local accounts keep working beside it.
def _env_list(name: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, "").split(",") if v.strip()]


OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip().rstrip("/")
OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "").strip()
OIDC_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "").strip() or (urlsplit(OIDC_ISSUER).hostname or "")
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "").strip() or "openid email profile"
# Who may sign in: an email domain in OIDC_ALLOWED_DOMAINS and/or a group in OIDC_ALLOWED_GROUPS
# (each list checked only when set; both set: both must pass). Lower-cased, exact domains.
OIDC_ALLOWED_DOMAINS = [d.lower().lstrip("@") for d in _env_list("OIDC_ALLOWED_DOMAINS")]
OIDC_ALLOWED_GROUPS = _env_list("OIDC_ALLOWED_GROUPS")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "").strip() or "groups"
# Roles from the provider's groups, applied at every sign-in when either list is set
# (inspector/roles.py): admin (Django staff) wins over viewer; anyone else is a member.
OIDC_ADMIN_GROUPS = _env_list("OIDC_ADMIN_GROUPS")
OIDC_VIEWER_GROUPS = _env_list("OIDC_VIEWER_GROUPS")
OIDC_ENABLED = bool(OIDC_ISSUER and OIDC_CLIENT_ID)

AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
if OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.append("inspector.oidc.SignInBackend")
# mozilla-django-oidc's own names for what the backend and views do not take from discovery.
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_USE_PKCE = True
OIDC_TIMEOUT = _env_float("OIDC_TIMEOUT", 10.0)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"

# litellm must never phone home for its cost map: the machine may be offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # LOG_FORMAT=json: one JSON object a line; either way a line logged while a worker runs a call
    # or an LLM step carries its call_id / turn_id (inspector/logs.py).
    "formatters": {
        "plain": {"()": "inspector.logs.PlainFormatter", "format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "inspector.logs.JsonFormatter"},
    },
    "filters": {"context": {"()": "inspector.logs.ContextFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["context"],
                             "formatter": "json" if os.environ.get("LOG_FORMAT") == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # The mcp SDK's HTTP client logs every request URL at INFO: a server URL may carry a token.
        "httpx2": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
    },
}


def sandbox_host() -> str:
    """The host[:port] of the sandbox origin, to tell its requests apart."""
    return urlsplit(SANDBOX_ORIGIN).netloc


SANDBOX_HOST = sandbox_host()
for _origin in (PUBLIC_URL, SANDBOX_ORIGIN):
    if urlsplit(_origin).hostname not in ALLOWED_HOSTS:
        ALLOWED_HOSTS.append(urlsplit(_origin).hostname)


# Server review (review/): the description-review rules, one module each, run in this order. A
# team adds its own rule class (name, check(texts, context)) here, like AUTH_PASSWORD_VALIDATORS.
REVIEW_RULES = [
    {"NAME": "review.rules.hidden_unicode.HiddenUnicode"},
    {"NAME": "review.rules.model_directives.ModelDirectives"},
    {"NAME": "review.rules.cross_server.CrossServerReference"},
    {"NAME": "review.rules.shadowing.ToolShadowing"},
    {"NAME": "review.rules.urls_and_blobs.UrlsAndBlobs"},
    {"NAME": "review.rules.long_descriptions.LongDescriptions"},
]
# Load tests (review/loadtest.py): the most calls one run may make, and the most in flight at once.
LOADTEST_MAX_CALLS = _env_int("LOADTEST_MAX_CALLS", 10_000)
LOADTEST_MAX_CONCURRENCY = _env_int("LOADTEST_MAX_CONCURRENCY", 64)
