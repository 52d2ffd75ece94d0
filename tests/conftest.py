"""Shared pytest setup: import paths, hypothesis profiles, and real servers started on demand.

Fixtures (servers start lazily, only when a test asks for them, and stop at session end):

- ``redis_server`` (session): a :class:`tests.servers.RedisServer` (``.host .port .url .pid
  .client() .start() .stop() .restart() .kill()``), AOF with fsync always.
- ``redis_url`` (function): server running, FLUSHALL + SCRIPT FLUSH, returns ``redis://127.0.0.1:PORT/0``.
- ``mariadb_server`` (session): a :class:`tests.servers.MariaDBServer` (``.host .port .pid
  .url_for(db) .connect() .create_database() .drop_database() .start() .stop() .restart()
  .kill()``), time zone +08:00, user docllm/docllm.
- ``mysql_url`` (function): a fresh empty database, its SQLAlchemy URL; dropped afterwards.
- ``sentinel_set`` / ``cluster_set`` (session): a :class:`tests.servers.SentinelSet` (primary,
  replica, three sentinels) and a :class:`tests.servers.RedisClusterSet` (three primaries with a
  replica each), started the first time a test asks, with 1 s detection times.
- ``sentinel_url`` / ``cluster_url`` (function): the set healed (every node a test stopped back)
  and flushed; ``redis+sentinel://...`` / ``redis+cluster://...``.

A missing server binary skips the test with a hint (``run scripts/test``), except under
``CI=true`` where it fails it.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `import tests.support...` and `import sim` from the repo root
    sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, settings  # noqa: E402

from sim import lua_cache  # noqa: E402
from tests.servers import (  # noqa: E402
    MariaDBServer,
    RedisClusterSet,
    RedisServer,
    SentinelSet,
    ServerFailedToStart,
    ServerNotInstalled,
)
from tests.support import ast_lock  # noqa: E402


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


ast_lock.install()  # CPython 3.11: a parse inside a parse fails (gh-106905); see the module
lua_cache.install()  # fakeredis compiles each script once, as Redis does; see the module

# -- hypothesis -----------------------------------------------------------------------------------

settings.register_profile(
    "ci",
    max_examples=200,
    stateful_step_count=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("dev", max_examples=50, deadline=None)


def _hypothesis_profile() -> str:
    requested = os.environ.get("HYPOTHESIS_PROFILE", "").strip()
    if in_ci() or requested == "ci":
        return "ci"
    return requested or "dev"


settings.load_profile(_hypothesis_profile())


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"docllm: CI={in_ci()} (missing servers {'fail' if in_ci() else 'skip'})"]


# -- markers --------------------------------------------------------------------------------------

_MARKERS_BY_FIXTURE = {
    "redis_server": "redis_server",
    "redis_url": "redis_server",
    "sentinel_set": "redis_server",
    "sentinel_url": "redis_server",
    "cluster_set": "redis_server",
    "cluster_url": "redis_server",
    "mariadb_server": "mariadb",
    "mysql_url": "mariadb",
}


SIM_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use a real server get its marker, so ``-m "not mariadb"`` works; files with a
    ``long`` test go first, longest first, so that none starts late and ends the run alone."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker in {m for fixture, m in _MARKERS_BY_FIXTURE.items() if fixture in names}:
            item.add_marker(marker)
        if item.nodeid.startswith("tests/sim/") and item.get_closest_marker("timeout") is None:
            # Simulated runs wait on virtual time only: the wall-clock limit guards a hang, and a
            # loaded 2-core machine stretches a run of seconds to minutes (a money run: 4.5 min).
            item.add_marker(pytest.mark.timeout(SIM_TIMEOUT_S))
    items.sort(key=_file_length(items))


def _file_length(items: list[pytest.Item]) -> Callable[[pytest.Item], float]:
    """Sort key: minus the seconds of the longest ``long`` test in the item's file (stable: a file's
    tests keep their order, and ``--dist loadfile`` hands out files in this order)."""
    seconds: dict[str, float] = {}
    for item in items:
        marker = item.get_closest_marker("long")
        if marker is not None:
            path = item.nodeid.split("::")[0]
            seconds[path] = max(seconds.get(path, 0.0), float(marker.args[0]))
    return lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0)


# -- servers --------------------------------------------------------------------------------------


def _server_missing(message: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing server is a failure, not a skip)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RedisServer:
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis"))
    except ServerNotInstalled as exc:
        _server_missing(str(exc))
    request.addfinalizer(server.close)  # also registered with atexit while running
    return server.start()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.start()  # a previous test may have stopped or killed it
    with redis_server.client() as client:
        client.flushall()
        client.script_flush()  # no Lua script cached by an earlier test
    return redis_server.url


@pytest.fixture(scope="session")
def sentinel_set(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SentinelSet:
    try:
        topology = SentinelSet(tmp_path_factory.mktemp("sentinel"))
    except ServerNotInstalled as exc:
        _server_missing(str(exc))
    request.addfinalizer(topology.close)
    return topology.start()


@pytest.fixture
def sentinel_url(sentinel_set: SentinelSet) -> str:
    sentinel_set.heal()  # a previous test may have killed a node
    sentinel_set.flush()
    return sentinel_set.url


@pytest.fixture(scope="session")
def cluster_set(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RedisClusterSet:
    for tries_left in (1, 0):
        try:
            topology = RedisClusterSet(tmp_path_factory.mktemp("cluster"))
        except ServerNotInstalled as exc:
            _server_missing(str(exc))
        request.addfinalizer(topology.close)
        try:
            return topology.start()
        except ServerFailedToStart:
            # Six nodes with a 1 s node timeout, created while the run's longest files start
            # beside them, once stayed unhealthy for a minute: a new set on new ports, once.
            topology.close()
            if not tries_left:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def cluster_url(cluster_set: RedisClusterSet) -> str:
    cluster_set.heal()
    cluster_set.flush()
    return cluster_set.url


@pytest.fixture(scope="session")
def mariadb_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> MariaDBServer:
    try:
        server = MariaDBServer(tmp_path_factory.mktemp("mariadb"))
    except ServerNotInstalled as exc:
        _server_missing(str(exc))
    request.addfinalizer(server.close)
    return server.start()


def _database_name(nodeid: str) -> str:
    """t_<test name>_<random>, at most 64 characters, for a readable SHOW DATABASES."""
    test = re.sub(r"[^A-Za-z0-9]+", "_", nodeid.rsplit("::", 1)[-1]).strip("_").lower()
    return f"t_{test[:40]}_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def mysql_url(mariadb_server: MariaDBServer, request: pytest.FixtureRequest) -> Iterator[str]:
    mariadb_server.start()  # a previous test may have stopped or killed it
    name = _database_name(request.node.nodeid)
    url = mariadb_server.create_database(name)
    yield url
    mariadb_server.start()  # this test may have stopped it
    mariadb_server.drop_database(name)
