"""Real servers for the tests: redis-server (alone, under Sentinel, as a Cluster) and MariaDB on
free loopback ports.

The pytest fixtures in ``tests/conftest.py`` wrap these; the classes also work on their own
(``with RedisServer() as r: ...``), e.g. from the simulation or a benchmark.
"""

from .mariadb_server import MariaDBServer, find_install_db, find_mariadbd
from .ports import LOOPBACK, free_port, port_is_open
from .procs import ServerFailedToStart, ServerNotInstalled
from .redis_server import RedisServer, find_redis_server
from .redis_topologies import RedisClusterSet, SentinelSet

__all__ = [
    "LOOPBACK",
    "MariaDBServer",
    "RedisClusterSet",
    "RedisServer",
    "SentinelSet",
    "ServerFailedToStart",
    "ServerNotInstalled",
    "find_install_db",
    "find_mariadbd",
    "find_redis_server",
    "free_port",
    "port_is_open",
]
