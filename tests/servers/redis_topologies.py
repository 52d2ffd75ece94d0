"""Redis with more than one server, on free loopback ports (ARCHITECTURE.md, Topologies):

- ``SentinelSet``: a primary, a replica and three sentinels (``redis-server --sentinel``) that
  watch it as ``MASTER_NAME``; detection after ``down_after_ms`` (1 s here, 30 s by default);
- ``RedisClusterSet``: three primaries with a replica each (``redis-cli --cluster create``),
  ``cluster-node-timeout`` ``node_timeout_ms`` (1 s here, 15 s by default).

Both are context managers like ``RedisServer``; ``heal()`` brings back every node a test stopped
and waits until the topology serves again, so one set serves a whole session.
"""

from __future__ import annotations

import random
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from . import procs
from .ports import LOOPBACK, free_port
from .procs import ServerFailedToStart, ServerNotInstalled
from .redis_server import RedisServer

MASTER_NAME = "docllm-primary"


def find_redis_cli(server_binary: str) -> str | None:
    """redis-cli next to the server (Debian's redis-tools, a dependency of redis-server)."""
    sibling = Path(server_binary).with_name("redis-cli")
    return str(sibling) if sibling.exists() else shutil.which("redis-cli")


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> float:
    """Poll ``check`` until it is true; returns the seconds it took."""
    start = time.monotonic()
    last: BaseException | None = None
    while time.monotonic() - start < timeout:
        try:
            if check():
                return time.monotonic() - start
        except (redis.RedisError, OSError) as exc:
            last = exc
        time.sleep(0.05)
    raise ServerFailedToStart(f"{what}: not within {timeout}s ({last!r})")


def free_cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too.

    Both lie below Linux's ephemeral range (32768 on), where the kernel would otherwise hand the
    bus port to some client's socket between this check and the node's bind (seen on CI).
    """
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(12000, 22767)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise ServerFailedToStart("no free port pair for a cluster node")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


class SentinelServer(RedisServer):
    """``redis-server sentinel.conf --sentinel``, watching the primary at ``primary_port``."""

    def __init__(self, directory: Path, primary_port: int, down_after_ms: int, **kwargs: Any) -> None:
        super().__init__(directory, **kwargs)
        self.conf = self.directory / "sentinel.conf"
        self.conf.write_text(
            f"sentinel monitor {MASTER_NAME} {LOOPBACK} {primary_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n"
            f"sentinel failover-timeout {MASTER_NAME} {max(3 * down_after_ms, 3000)}\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )

    def _argv(self) -> list[str]:
        # the conf first (sentinel rewrites it with what it learns); the port on the command line
        return [self.binary, str(self.conf), "--sentinel", "--port", str(self.port), "--bind", self.host]
        # (no --dir: sentinel resolves the conf's path relative to its working directory)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"


class SentinelSet:
    def __init__(self, directory: Path | None = None, down_after_ms: int = 1000) -> None:
        self._owns = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="docllm-sentinel-"))
        self.down_after_ms = down_after_ms
        primary = RedisServer(self.directory / "a", port=free_port())
        replica = RedisServer(self.directory / "b", port=free_port(), extra_args=self._replica_of(primary))
        self.data_nodes = [primary, replica]
        self.sentinels = [
            SentinelServer(self.directory / f"s{i}", primary.port, down_after_ms, port=free_port()) for i in range(3)
        ]

    @staticmethod
    def _replica_of(primary: RedisServer) -> tuple[str, ...]:
        return ("--replicaof", primary.host, str(primary.port))

    @property
    def url(self) -> str:
        hosts = ",".join(f"{s.host}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}/0"

    def sentinel_client(self) -> redis.Redis:
        for sentinel in self.sentinels:
            if sentinel.is_running:
                return sentinel.client(socket_timeout=1)
        raise ServerFailedToStart("no sentinel running")

    def primary(self) -> RedisServer:
        """The data node the sentinels name as primary now."""
        with self.sentinel_client() as client:
            host, port = client.sentinel_get_master_addr_by_name(MASTER_NAME)
        return next(node for node in self.data_nodes if node.port == int(port))

    def start(self) -> SentinelSet:
        for node in self.data_nodes + self.sentinels:
            node.start()
        # From now on the sentinels say who follows whom: a data node restarts as it is and is
        # turned into a replica by them when it is not the primary
        for node in self.data_nodes:
            node.extra_args = ()
        procs.register(self)
        self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 30.0) -> float:
        """Every sentinel sees the primary up, the other two sentinels and a replica in sync."""

        def healthy() -> bool:
            for sentinel in self.sentinels:
                with sentinel.client(socket_timeout=1) as client:
                    master = client.sentinel_master(MASTER_NAME)
                    replicas = client.sentinel_slaves(MASTER_NAME)
                    if master.get("is_sdown") or master.get("is_odown") or master.get("num-other-sentinels", 0) < 2:
                        return False
                    if not any(
                        r.get("is_slave") and not r.get("is_sdown") and r.get("master-link-status") == "ok"
                        for r in replicas
                    ):
                        return False
            with self.primary().client(socket_timeout=1) as data:
                return data.info("replication").get("connected_slaves", 0) >= 1

        return wait_for("sentinel set healthy", healthy, timeout)

    def heal(self) -> None:
        """Start every node a test stopped (a stopped data node comes back as a replica) and wait
        until the set is healthy again (one poll when it is: a switch-over changes no process)."""
        for node in [*self.data_nodes, *self.sentinels]:
            node.start()
        self.wait_healthy()

    def flush(self) -> None:
        with self.primary().client() as client:
            client.flushall()
            client.script_flush()

    def stop(self) -> None:
        for node in self.sentinels + self.data_nodes:
            node.stop()

    def close(self) -> None:
        for node in self.sentinels + self.data_nodes:
            node.close()
        procs.unregister(self)
        if self._owns:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> SentinelSet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class RedisClusterSet:
    def __init__(self, directory: Path | None = None, node_timeout_ms: int = 1000) -> None:
        self._owns = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="docllm-cluster-"))
        self.node_timeout_ms = node_timeout_ms
        args = (
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-replica-validity-factor", "0",  # any replica may take over, however stale
            "--cluster-require-full-coverage", "no",
        )  # fmt: skip
        # fixed ports: a node's address is in the other nodes' nodes.conf
        self.nodes = [
            RedisServer(self.directory / f"n{i}", choose_port=free_cluster_port, extra_args=args) for i in range(6)
        ]
        cli = find_redis_cli(self.nodes[0].binary)
        if cli is None:
            raise ServerNotInstalled("redis-cli not installed (Debian package redis-tools): run scripts/test")
        self.cli: str = cli
        self._created = False
        self._admin: RedisCluster | None = None

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{n.host}:{n.port}" for n in self.nodes[:3])

    def client(self, **kwargs: Any) -> RedisCluster:
        kwargs.setdefault("socket_timeout", 5)
        return RedisCluster(startup_nodes=[ClusterNode(n.host, n.port) for n in self.nodes if n.is_running], **kwargs)

    def start(self) -> RedisClusterSet:
        for node in self.nodes:
            node.start()
        procs.register(self)
        if not self._created:
            argv = [self.cli, "--cluster", "create", *(f"{n.host}:{n.port}" for n in self.nodes)]
            argv += ["--cluster-replicas", "1", "--cluster-yes"]
            code = procs.run(argv, self.directory / "create.log", timeout=60)
            if code != 0:
                raise ServerFailedToStart(f"redis-cli --cluster create: {procs.tail(self.directory / 'create.log')}")
            self._created = True
        self.wait_healthy()
        return self

    def owner_of(self, key: str) -> RedisServer:
        """The data node that serves ``key``'s slot now."""
        with self.client() as client:
            node = client.get_node_from_key(key)
        return next(n for n in self.nodes if n.port == node.port)

    def wait_healthy(self, timeout: float = 60.0) -> float:
        """Every running node says cluster_state:ok, and three primaries each have a replica."""

        seen: dict[int, Any] = {}  # each node's last cluster_state, for a failed wait's message

        def healthy() -> bool:
            seen.clear()
            for node in self.nodes:
                if node.is_running:
                    with node.client(socket_timeout=1) as client:
                        state = seen[node.port] = client.cluster("info").get("cluster_state")
                        if state != "ok":
                            return False
            running = next(n for n in self.nodes if n.is_running)
            with running.client(socket_timeout=1) as client:
                nodes = client.cluster("nodes")
            alive = [info for info in nodes.values() if "fail" not in info["flags"]]
            primaries = [i for i in alive if "master" in i["flags"] and i.get("slots")]
            replicas = [i for i in alive if "slave" in i["flags"]]
            return len(primaries) == 3 and len(replicas) == 3

        try:
            return wait_for("redis cluster healthy", healthy, timeout)
        except ServerFailedToStart as exc:  # say what each node last said
            raise ServerFailedToStart(f"{exc}; cluster_state by port: {seen}") from None

    def heal(self) -> None:
        """Start every node a test stopped (it rejoins as a replica) and wait until the cluster is
        healthy again (one poll when it is)."""
        restarted = [node for node in self.nodes if not node.is_running]
        for node in restarted:
            node.start()
        self.wait_healthy()
        if restarted:
            self._drop_admin()

    def flush(self) -> None:
        try:
            self._flush()
        except (redis.RedisError, redis.exceptions.RedisClusterException):
            self._drop_admin()  # a client that still knows the old layout: once more, fresh
            self._flush()

    def _flush(self) -> None:
        if self._admin is None:
            self._admin = self.client()
        self._admin.flushall(target_nodes=RedisCluster.PRIMARIES)
        self._admin.script_flush()  # on every node

    def _drop_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def close(self) -> None:
        self._drop_admin()
        for node in self.nodes:
            node.close()
        procs.unregister(self)
        if self._owns:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisClusterSet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
