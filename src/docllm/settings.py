"""Settings from the environment (DESIGN section 8), validated at start.

A bad value stops the program with a message that names the variable; secrets never appear in
``repr`` or logs.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from docllm.domain.errors import ConfigurationError
from docllm.domain.lanes.model import BATCH_LANE, DEFAULT_WEIGHTS, LANES, LanePolicy, parse_caps, parse_weights
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.llm.deployments import Deployment, parse_deployments
from docllm.domain.llm.prices import PriceTable
from docllm.domain.tasks.policies import LeasePolicy, Limits, RetryPolicy

EMBEDDED_REDIS = "embedded"
PROVIDERS = ("offline", "openai")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TRACING_MODES = ("auto", "on", "off")
BATCH_WINDOW_SECONDS = 24 * 3600  # the completion window every batch is created with ("24h")
# Every numeric setting is finite and within 0..MAX_NUMBER (each may be narrower): a duration past
# it, or inf, would overflow a timer or a millisecond count (DOCLLM_BATCH_MAX_WAIT_SECONDS=inf did).
MAX_NUMBER = 1e9
YEAR_S = 31_536_000  # the longest timeout MySQL and its driver take (connect_timeout, idle_transaction_timeout)


class SettingsError(ConfigurationError):
    """A setting has a value docllm cannot run with."""


@dataclass(frozen=True)
class Settings:
    home: str = ".docllm"
    redis_url: str = EMBEDDED_REDIS
    database_url: str = ""
    database_connect_timeout_seconds: float = 10.0
    database_timeout_seconds: float = 60.0
    store_connections: int = 8  # SQL connections per process, however many attempts run (no overflow)
    store_linger_ms: float = 5.0  # how long a group of store writes or of acks may wait to fill (0: never waits)
    queue_prefix: str = "docllm"
    lease_seconds: float = LeasePolicy.lease_seconds
    processing_timeout_seconds: float = LeasePolicy.max_runtime_seconds
    reaper_interval_seconds: float = LeasePolicy.reaper_interval_seconds
    reconcile_interval_seconds: float = 60.0
    reconcile_grace_seconds: float = 300.0
    max_attempts: int = RetryPolicy.max_attempts
    max_handbacks: int = RetryPolicy.max_handbacks  # uncharged LLM hand-backs per task while the provider serves (I12)
    retry_base_seconds: float = RetryPolicy.base_seconds
    retry_max_seconds: float = RetryPolicy.cap_seconds
    concurrency: int = 4
    shutdown_grace_seconds: float = 20.0
    max_payload_bytes: int = Limits.max_payload_bytes
    max_document_bytes: int = Limits.max_document_bytes
    llm_provider: str = "offline"
    llm_base_url: str = "https://api.openai.com/v1"
    llm_api_key: str = field(default="", repr=False)
    llm_model: str = "gpt-4o-mini"
    llm_timeout_seconds: float = 60.0
    llm_max_chunk_chars: int = 12000
    llm_chunk_parallelism: int = 4
    llm_prices: str = ""  # PriceTable format; empty: no prices, no cost
    spend_cap_usd_per_day: float = 0.0  # the fleet's LLM spend per authority-clock day (I14); 0: off
    task_max_cost_usd: float = 0.0  # a task estimated to cost more fails before any call; 0: off
    offline_latency_seconds: float = 0.0
    rubrics_dir: str = "rubrics"  # NAME.yaml files a task's --rubric NAME names; relative to the working directory
    llm_rpm: int | None = None  # the fleet's requests per minute to one base URL and model; None: off
    llm_tpm: int | None = None  # the fleet's tokens per minute; None: off
    # DOCLLM_LLM_DEPLOYMENTS, parsed at start; empty: the one deployment of DOCLLM_LLM_BASE_URL etc.
    llm_deployments: tuple[Deployment, ...] = ()
    log_format: str = "text"
    log_level: str = "INFO"
    metrics_port: int | None = None
    tracing: str = "auto"  # auto: on when an OTEL_* exporter is configured and docllm[otel] installed; on; off
    tracing_file: str = ""  # also write every span as a JSON line here (debugging, tests)
    metrics_host: str = "0.0.0.0"
    worker_id: str = ""
    dashboard_token: str = field(default="", repr=False)
    dashboard_on_worker: bool = False
    # The dashboard's guards (docs/DEPLOY.md, Security): a login lasts this long at most; served
    # over HTTPS only (a TLS proxy in front: Secure cookies, HSTS); the proxies in front whose
    # X-Forwarded-For and -Proto are believed (0: none).
    dashboard_session_seconds: float = 8 * 3600.0
    dashboard_https: bool = False
    dashboard_trusted_proxies: int = 0
    breaker_window_seconds: float = BreakerPolicy.window_seconds
    breaker_failure_ratio: float = BreakerPolicy.failure_ratio
    breaker_min_calls: int = BreakerPolicy.min_calls
    breaker_open_seconds: float = BreakerPolicy.open_seconds
    # How long the Redis topology takes to replace a failed primary (detection + promotion);
    # None: 0 for one server, 30 s for Sentinel and Cluster (their default detection times).
    redis_failover_seconds: float | None = None
    # Replicas that must have a claim or an ack before it counts as done (WAIT, up to 1 s; 0: off).
    redis_wait_replicas: int = 0
    # Lanes and tenants (issue 26, domain/lanes/model.py): claim weights; tasks in flight per tenant
    # (0: no cap), and per-tenant overrides "acme=4,beta=2".
    lane_weights: str = DEFAULT_WEIGHTS
    tenant_max_in_flight: int = 0
    tenant_caps: str = ""
    # The batch lane (issue 28): the single-URL deployment offers the Batch API (DOCLLM_LLM_BATCH);
    # a batch holds up to this many bulk tasks, or what waited this long; pollers look this often.
    llm_batch: bool = False
    batch_max_tasks: int = 500
    batch_max_wait_seconds: float = 60.0
    batch_poll_seconds: float = 30.0

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SECRETS}
        shown["redis_url"], shown["database_url"] = redact_url(self.redis_url), redact_url(self.database_url)
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @property
    def price_table(self) -> PriceTable:
        return PriceTable.parse(self.llm_prices)

    @property
    def lane_policy(self) -> LanePolicy:
        """The realtime claim's: with batching on it leaves the bulk lane to the batcher."""
        serves = tuple(lane for lane in LANES if lane != BATCH_LANE) if self.batch_deployment else ()
        return LanePolicy(
            parse_weights(self.lane_weights), self.tenant_max_in_flight, parse_caps(self.tenant_caps), serves
        )

    @property
    def deployments(self) -> tuple[Deployment, ...]:
        """The LLM deployments in force: DOCLLM_LLM_DEPLOYMENTS, or the single-URL settings as a list of one."""
        if self.llm_deployments:
            return self.llm_deployments
        one = Deployment(
            name="default",
            base_url=self.llm_base_url,
            model=self.llm_model,
            api_key=self.llm_api_key,
            rpm=self.llm_rpm,
            tpm=self.llm_tpm,
            price=self.price_table.price(self.llm_model),
            batch=self.llm_batch,
        )
        return (one,)

    @property
    def batch_deployment(self) -> Deployment | None:
        """Where the bulk lane's batches go: the first deployment that offers batches (openai
        only); None: batching is off and every lane is realtime."""
        if self.llm_provider != "openai":
            return None
        return next((d for d in self.deployments if d.batch), None)

    @property
    def batch_lease_seconds(self) -> float:
        """The batch lease's TTL and the period its holder renews the members' leases at (at most
        ``lease_seconds / 3``; see ``docs/ARCHITECTURE.md``, the batch lane): a poller that dies
        leaves the lease for one TTL, the next poller renews within one period more, so the
        members' leases (``lease_seconds``) never lapse while their batch is polled:
        TTL + period <= 2/3 lease < lease."""
        return min(self.batch_poll_seconds, self.lease_seconds / 3)

    @property
    def batch_give_up_seconds(self) -> float:
        """A batch still unfinished this long after it was opened is cancelled and its members
        handed back: the provider's 24 h window and a minute for its finalizing."""
        return BATCH_WINDOW_SECONDS + 60

    @property
    def batch_bound_seconds(self) -> float:
        """The processing bound of a batched attempt (I15): ``batch_give_up_seconds``, plus the
        time for a poller to see it (a poll, or a lease when the poller died, then the reaper)."""
        return self.batch_give_up_seconds + self.batch_poll_seconds + self.lease_seconds + self.reaper_interval_seconds

    @property
    def sqlite_path(self) -> str:
        return os.path.join(self.home, "docllm.db")

    @property
    def embedded_redis_path(self) -> str:
        return os.path.join(self.home, "redis.db")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, (var, parse) in _VARIABLES.items():
            raw = env.get(var)
            if name == "llm_api_key" and not raw:
                raw = env.get("OPENAI_API_KEY")
            if raw is None or raw == "":
                continue
            try:
                values[name] = load_deployments(raw.strip(), env) if name == "llm_deployments" else parse(raw.strip())
            except ValueError as exc:
                raise SettingsError(f"{var}={_shown(name, raw)!s}: {exc}") from None
        settings = cls(**values)
        if not settings.database_url:
            url = "sqlite:///" + os.path.abspath(settings.sqlite_path)
            settings = replace(settings, database_url=url)
        if not settings.worker_id:
            settings = replace(settings, worker_id=f"{socket.gethostname()}:{os.getpid()}")
        settings.validate()
        return settings

    def validate(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                var = _VARIABLES[name][0]
                raise SettingsError(f"{var}={_shown(name, getattr(self, name))}: {why}")

        self._validate_numbers(need)

        for name in (
            "lease_seconds",
            "processing_timeout_seconds",
            "reaper_interval_seconds",
            "reconcile_interval_seconds",
            "llm_timeout_seconds",
            "retry_base_seconds",
            "database_connect_timeout_seconds",
            "database_timeout_seconds",
        ):
            need(getattr(self, name) > 0, name, "must be greater than 0")
        # The database's own bounds (MAX_NUMBER is a guard, not a range): PyMySQL refuses a connect
        # timeout over a year; twice the I/O timeout is the session's idle_transaction_timeout.
        need(
            self.database_connect_timeout_seconds <= YEAR_S,
            "database_connect_timeout_seconds",
            "must be at most 31536000 (a year)",
        )
        need(
            self.database_timeout_seconds <= YEAR_S / 2,
            "database_timeout_seconds",
            "must be at most 15768000 (half a year)",
        )
        for name in ("reconcile_grace_seconds", "shutdown_grace_seconds", "offline_latency_seconds", "store_linger_ms"):
            need(getattr(self, name) >= 0, name, "must not be negative")
        need(
            self.retry_max_seconds >= self.retry_base_seconds,
            "retry_max_seconds",
            "must be at least DOCLLM_RETRY_BASE_SECONDS",
        )
        need(self.max_handbacks >= 0, "max_handbacks", "must not be negative")
        for name in (
            "max_attempts",
            "concurrency",
            "max_payload_bytes",
            "max_document_bytes",
            "llm_max_chunk_chars",
            "llm_chunk_parallelism",
            "store_connections",
        ):
            need(getattr(self, name) >= 1, name, "must be at least 1")
        need(self.store_linger_ms <= 1000, "store_linger_ms", "must be at most 1000 (a linger is milliseconds)")
        for name in ("llm_rpm", "llm_tpm"):
            need(getattr(self, name) is None or getattr(self, name) >= 1, name, "must be at least 1 (unset: no limit)")
        try:
            prices = PriceTable.parse(self.llm_prices)
        except ValueError as exc:
            need(False, "llm_prices", str(exc))
        if prices.entries and self.llm_provider == "openai" and not self.llm_deployments:  # a typo would cost nothing
            need(
                prices.price(self.llm_model) is not None,
                "llm_prices",
                f"has no price for {self.llm_model!r} (DOCLLM_LLM_MODEL): add it, or a '*' entry",
            )
        for name in ("spend_cap_usd_per_day", "task_max_cost_usd"):
            value = getattr(self, name)
            need(math.isfinite(value) and value >= 0, name, "must be a number >= 0 (0: off)")
        self._validate_priced(need, prices)
        need(self.breaker_window_seconds >= 1, "breaker_window_seconds", "must be at least 1")
        need(self.breaker_open_seconds > 0, "breaker_open_seconds", "must be greater than 0")
        need(0 < self.breaker_failure_ratio <= 1, "breaker_failure_ratio", "must be greater than 0 and at most 1")
        need(self.breaker_min_calls >= 1, "breaker_min_calls", "must be at least 1")
        need(self.llm_provider in PROVIDERS, "llm_provider", f"must be one of {', '.join(PROVIDERS)}")
        need(self.log_format in LOG_FORMATS, "log_format", f"must be one of {', '.join(LOG_FORMATS)}")
        need(self.log_level in LOG_LEVELS, "log_level", f"must be one of {', '.join(LOG_LEVELS)}")
        need(self.metrics_port is None or 0 <= self.metrics_port <= 65535, "metrics_port", "must be a port number")
        need(self.tracing in TRACING_MODES, "tracing", f"must be one of {', '.join(TRACING_MODES)}")
        self._validate_redis(need)
        self._validate_lanes(need)
        self._validate_batches(need)
        need("://" in self.database_url, "database_url", "must be an SQLAlchemy URL")
        need(
            not self.dashboard_on_worker or self.metrics_port is not None,
            "dashboard_on_worker",
            "needs DOCLLM_METRICS_PORT (the dashboard is served on that port)",
        )
        self._validate_numbers(need, at_least=0)
        need(
            not self.dashboard_on_worker or bool(self.dashboard_token) or is_loopback(self.metrics_host),
            "dashboard_on_worker",
            f"DOCLLM_METRICS_HOST={self.metrics_host!r} is not a loopback address: set DOCLLM_DASHBOARD_TOKEN",
        )
        token_problem = dashboard_token_problem(self.dashboard_token)
        need(not token_problem, "dashboard_token", token_problem)
        need(self.dashboard_session_seconds >= 60, "dashboard_session_seconds", "must be at least 60")
        need(self.dashboard_trusted_proxies >= 0, "dashboard_trusted_proxies", "must not be negative")
        need(
            not self.dashboard_https or self.dashboard_trusted_proxies >= 1,
            "dashboard_https",
            "needs DOCLLM_DASHBOARD_TRUSTED_PROXIES (docllm serves plain HTTP: the TLS proxy in front says https)",
        )
        if self.llm_provider == "openai" and not self.llm_deployments:  # each deployment has its own key
            need(
                bool(self.llm_api_key),
                "llm_api_key",
                "is required with DOCLLM_LLM_PROVIDER=openai (or set OPENAI_API_KEY)",
            )

    def _validate_numbers(self, need: Callable[[bool, str, str], None], at_least: float = -math.inf) -> None:
        """Every numeric setting, whatever its own rule: finite and at most MAX_NUMBER (first, so the
        message names the setting that is out of range, not one compared with it); ``at_least``:
        and not below it (last, after each setting's own, more precise, rule)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                ok = math.isfinite(value) and at_least <= value <= MAX_NUMBER
                need(ok, f.name, f"must be a finite number from 0 to {MAX_NUMBER:g}")

    def _validate_priced(self, need: Callable[[bool, str, str], None], prices: PriceTable) -> None:
        """With any cap set, every deployment is priced (its own prices, else DOCLLM_LLM_PRICES'):
        the spend ledger reserves and counts at those prices, and an unpriced one would spend
        uncounted past every cap (I16)."""
        settings = [n for n in ("spend_cap_usd_per_day", "task_max_cost_usd") if getattr(self, n) > 0]
        if not self.llm_deployments:
            for name in settings:
                need(bool(prices.entries), name, "needs prices to count spend: set DOCLLM_LLM_PRICES")
            return
        caps = [_VARIABLES[n][0] for n in settings]
        caps += [f"{d.name}'s spend_cap_usd_per_day" for d in self.llm_deployments if d.spend_cap_usd]
        for d in self.llm_deployments if caps else ():
            need(
                d.price is not None or prices.price(d.model) is not None,
                "llm_deployments",
                f"deployment {d.name!r} has no price for {d.model!r} and {caps[0]} is set: give it "
                '"prices", or price its model in DOCLLM_LLM_PRICES',
            )

    def _validate_redis(self, need: Callable[[bool, str, str], None]) -> None:
        from docllm.adapters.redis.urls import hash_tag, is_cluster_url, parse_redis_url  # stdlib only

        if self.redis_url != EMBEDDED_REDIS:
            try:
                parse_redis_url(self.redis_url)
            except ValueError as exc:
                need(False, "redis_url", f"{exc} (or '{EMBEDDED_REDIS}')")
        if is_cluster_url(self.redis_url):
            tagged = "{" + self.queue_prefix.strip("{}") + "}"
            need(
                hash_tag(self.queue_prefix) is not None,
                "queue_prefix",
                "on Redis Cluster the prefix needs a hash tag so that every key of the queue is in one "
                f"slot: set DOCLLM_QUEUE_PREFIX={tagged}, and producers push to {tagged}:queue:ready",
            )
        need(self.redis_wait_replicas >= 0, "redis_wait_replicas", "must not be negative")
        need(
            self.redis_failover_seconds is None or self.redis_failover_seconds >= 0,
            "redis_failover_seconds",
            "must not be negative",
        )

    def _validate_lanes(self, need: Callable[[bool, str, str], None]) -> None:
        for name, parse in (("lane_weights", parse_weights), ("tenant_caps", parse_caps)):
            try:
                parse(getattr(self, name))
            except ValueError as exc:
                need(False, name, str(exc))
        need(self.tenant_max_in_flight >= 0, "tenant_max_in_flight", "must not be negative (0: no cap)")

    def _validate_batches(self, need: Callable[[bool, str, str], None]) -> None:
        need(
            not (self.llm_batch and self.llm_deployments),
            "llm_batch",
            'is for the single-URL form: with DOCLLM_LLM_DEPLOYMENTS give the deployment "batch": true',
        )
        need(1 <= self.batch_max_tasks <= 50_000, "batch_max_tasks", "must be 1..50000 (the Batch API's limit)")
        need(self.batch_max_wait_seconds >= 0, "batch_max_wait_seconds", "must not be negative")
        need(
            0 < self.batch_poll_seconds <= 3600,
            "batch_poll_seconds",
            "must be greater than 0 and at most 3600 (a batch ends within the provider's 24 h window)",
        )
        need(
            self.batch_deployment is None or self.lease_seconds >= 3,
            "lease_seconds",
            "must be at least 3 with batching on: the batch lease and its renewals are a third of it",
        )

    @property
    def failover_seconds(self) -> float:
        """The failover the leases must survive (``redis_failover_seconds`` or its default)."""
        if self.redis_failover_seconds is not None:
            return self.redis_failover_seconds
        return 30.0 if "+sentinel://" in self.redis_url or "+cluster://" in self.redis_url else 0.0

    def warnings(self) -> list[str]:
        """Settings that run but cannot keep their promise; logged at start."""
        found = []
        failover, need_lease = self.failover_seconds, lease_for_failover(self.failover_seconds)
        if failover > 0 and self.lease_seconds < need_lease:
            found.append(
                f"DOCLLM_LEASE_SECONDS={self.lease_seconds:g} cannot ride through a Redis failover of "
                f"{failover:g} s (DOCLLM_REDIS_FAILOVER_SECONDS): leases still valid may expire and their "
                f"tasks run twice (each still committed once). Use a lease of at least {need_lease:g} s "
                "(2 x failover + 5), or a faster failover"
            )
        return found


def lease_for_failover(failover_seconds: float) -> float:
    """The shortest lease whose still-valid holders keep it through a failover this long (DESIGN 10).

    A lease is renewed every lease/3 and, after a failed renewal, every second. The new primary may
    miss the last renewal the old one acknowledged (async replication), so its deadline may date from
    one heartbeat before the crash; the first renewal after the failover comes at most
    failover + 1 s after it. So lease - lease/3 > failover + 1 s + margin, that is
    lease > 1.5 x (failover + 1) + margin; 2 x failover + 5 s covers it with >= 3.5 s to spare.
    """
    return 0.0 if failover_seconds <= 0 else 2 * failover_seconds + 5


def _number(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        try:
            value = kind(raw)
        except ValueError:
            raise ValueError(f"is not a{'n integer' if kind is int else ' number'}") from None
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    return parse


def _flag(raw: str) -> bool:
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be 1 or 0 (true/false, yes/no, on/off)")


def is_loopback(host: str) -> bool:
    """Whether a bind address accepts connections from this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


# Words a person or an example writes into a token; none is likely in 32 random characters.
PLACEHOLDER = re.compile(
    r"change.?me|placeholder|replace.?me|example|your.?token|secret|passw|token|dashboard|docllm|admin|default",
    re.I,
)


def dashboard_token_problem(token: str) -> str:
    """Why DOCLLM_DASHBOARD_TOKEN cannot guard the dashboard ("" when it can; no token at all is
    the loopback-only mode). Not a measure of randomness: it refuses what a person or an example
    writes (too short, a placeholder or a name, few distinct characters, a repeated or counted
    pattern); a random token is refused about once in 10^5 draws (draw again). Never shown."""
    how = "make one with `openssl rand -hex 32`"
    if not token:
        return ""
    if len(token) < 32:
        return f"is too short ({len(token)} characters, at least 32): {how}"
    steps = [ord(b) - ord(a) for a, b in zip(token, token[1:], strict=False)]
    patterned = any(token[k:] == token[:-k] for k in range(1, len(token) // 2 + 1))
    if PLACEHOLDER.search(token) or len(set(token)) < 8 or patterned or steps.count(1) > len(steps) // 2:
        return f"looks chosen or a placeholder, not a random secret: {how}"
    return ""


def load_deployments(raw: str, env: Mapping[str, str]) -> tuple[Deployment, ...]:
    """DOCLLM_LLM_DEPLOYMENTS: inline JSON (it starts with ``[``), or the path of a YAML or JSON file."""
    if raw.startswith(("[", "{")):
        text, kind = raw, "JSON"
    else:
        try:
            with open(raw, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ValueError(f"is neither inline JSON (a list) nor a readable file: {exc.strerror}") from None
        kind = "YAML" if raw.endswith((".yaml", ".yml")) else "JSON"
    try:
        if kind == "YAML":
            import yaml

            data = yaml.safe_load(text)
        else:
            import json

            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - json's and yaml's errors: the first line says where
        raise ValueError(f"is not valid {kind}: {str(exc).splitlines()[0]}") from None
    return parse_deployments(data, env)


def _port(raw: str) -> int:
    return _number(int)(raw)


_VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "home": ("DOCLLM_HOME", str),
    "redis_url": ("DOCLLM_REDIS_URL", str),
    "database_url": ("DOCLLM_DATABASE_URL", str),
    "database_connect_timeout_seconds": ("DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS", _number(float)),
    "database_timeout_seconds": ("DOCLLM_DATABASE_TIMEOUT_SECONDS", _number(float)),
    "store_connections": ("DOCLLM_STORE_CONNECTIONS", _number(int)),
    "store_linger_ms": ("DOCLLM_STORE_LINGER_MS", _number(float)),
    "queue_prefix": ("DOCLLM_QUEUE_PREFIX", str),
    "lease_seconds": ("DOCLLM_LEASE_SECONDS", _number(float)),
    "processing_timeout_seconds": ("PROCESSING_TIMEOUT_SECONDS", _number(float)),
    "reaper_interval_seconds": ("DOCLLM_REAPER_INTERVAL_SECONDS", _number(float)),
    "reconcile_interval_seconds": ("DOCLLM_RECONCILE_INTERVAL_SECONDS", _number(float)),
    "reconcile_grace_seconds": ("DOCLLM_RECONCILE_GRACE_SECONDS", _number(float)),
    "max_attempts": ("DOCLLM_MAX_ATTEMPTS", _number(int)),
    "max_handbacks": ("DOCLLM_MAX_HANDBACKS", _number(int)),
    "retry_base_seconds": ("DOCLLM_RETRY_BASE_SECONDS", _number(float)),
    "retry_max_seconds": ("DOCLLM_RETRY_MAX_SECONDS", _number(float)),
    "concurrency": ("DOCLLM_CONCURRENCY", _number(int)),
    "shutdown_grace_seconds": ("DOCLLM_SHUTDOWN_GRACE_SECONDS", _number(float)),
    "max_payload_bytes": ("DOCLLM_MAX_PAYLOAD_BYTES", _number(int)),
    "max_document_bytes": ("DOCLLM_MAX_DOCUMENT_BYTES", _number(int)),
    "llm_provider": ("DOCLLM_LLM_PROVIDER", str.lower),
    "llm_base_url": ("DOCLLM_LLM_BASE_URL", str),
    "llm_api_key": ("DOCLLM_LLM_API_KEY", str),
    "llm_model": ("DOCLLM_LLM_MODEL", str),
    "llm_timeout_seconds": ("DOCLLM_LLM_TIMEOUT_SECONDS", _number(float)),
    "llm_max_chunk_chars": ("DOCLLM_LLM_MAX_CHUNK_CHARS", _number(int)),
    "llm_chunk_parallelism": ("DOCLLM_LLM_CHUNK_PARALLELISM", _number(int)),
    "llm_prices": ("DOCLLM_LLM_PRICES", str),
    "spend_cap_usd_per_day": ("DOCLLM_SPEND_CAP_USD_PER_DAY", _number(float)),
    "task_max_cost_usd": ("DOCLLM_TASK_MAX_COST_USD", _number(float)),
    "offline_latency_seconds": ("DOCLLM_OFFLINE_LATENCY_SECONDS", _number(float)),
    "rubrics_dir": ("DOCLLM_RUBRICS_DIR", str),
    "llm_rpm": ("DOCLLM_LLM_RPM", _number(int)),
    "llm_tpm": ("DOCLLM_LLM_TPM", _number(int)),
    "llm_deployments": ("DOCLLM_LLM_DEPLOYMENTS", str),  # read by load_deployments (it needs the environment)
    "log_format": ("DOCLLM_LOG_FORMAT", str.lower),
    "log_level": ("DOCLLM_LOG_LEVEL", str.upper),
    "metrics_port": ("DOCLLM_METRICS_PORT", _port),
    "tracing": ("DOCLLM_TRACING", str.lower),
    "tracing_file": ("DOCLLM_TRACING_FILE", str),
    "metrics_host": ("DOCLLM_METRICS_HOST", str),
    "worker_id": ("DOCLLM_WORKER_ID", str),
    "dashboard_token": ("DOCLLM_DASHBOARD_TOKEN", str),
    "dashboard_on_worker": ("DOCLLM_DASHBOARD_ON_WORKER", _flag),
    "dashboard_session_seconds": ("DOCLLM_DASHBOARD_SESSION_SECONDS", _number(float)),
    "dashboard_https": ("DOCLLM_DASHBOARD_HTTPS", _flag),
    "dashboard_trusted_proxies": ("DOCLLM_DASHBOARD_TRUSTED_PROXIES", _number(int)),
    "breaker_window_seconds": ("DOCLLM_BREAKER_WINDOW_SECONDS", _number(float)),
    "breaker_failure_ratio": ("DOCLLM_BREAKER_FAILURE_RATIO", _number(float)),
    "breaker_min_calls": ("DOCLLM_BREAKER_MIN_CALLS", _number(int)),
    "breaker_open_seconds": ("DOCLLM_BREAKER_OPEN_SECONDS", _number(float)),
    "redis_failover_seconds": ("DOCLLM_REDIS_FAILOVER_SECONDS", _number(float)),
    "redis_wait_replicas": ("DOCLLM_REDIS_WAIT_REPLICAS", _number(int)),
    "lane_weights": ("DOCLLM_LANE_WEIGHTS", str),
    "tenant_max_in_flight": ("DOCLLM_TENANT_MAX_IN_FLIGHT", _number(int)),
    "tenant_caps": ("DOCLLM_TENANT_CAPS", str),
    "llm_batch": ("DOCLLM_LLM_BATCH", _flag),
    "batch_max_tasks": ("DOCLLM_BATCH_MAX_TASKS", _number(int)),
    "batch_max_wait_seconds": ("DOCLLM_BATCH_MAX_WAIT_SECONDS", _number(float)),
    "batch_poll_seconds": ("DOCLLM_BATCH_POLL_SECONDS", _number(float)),
}
SECRETS = ("llm_api_key", "dashboard_token")
assert set(_VARIABLES) == {f.name for f in fields(Settings)}

SETTINGS_TABLE = {name: var for name, (var, _) in _VARIABLES.items()}


def redact_url(url: str) -> str:
    """A URL without its passwords (also ``?sentinel_password=``), for messages and logs."""
    url = re.sub(r"(password=)[^&]*", r"\1***", url)
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


def _shown(name: str, value: Any) -> str:
    if name in SECRETS or name == "llm_deployments":  # inline JSON may hold API keys
        parsed = isinstance(value, tuple)  # the deployments read: named by the message instead
        return "<hidden>" if name in SECRETS or parsed or str(value).startswith(("[", "{")) else repr(value)
    return repr(redact_url(value)) if name in ("redis_url", "database_url") else repr(value)
