"""Sentinel mode of the chaos run (``ChaosSettings.topology == "sentinel"``, ``scripts/chaos --sentinel``).

Redis is a Sentinel set (a primary, a replica, three sentinels, detection after 1 s; see
tests/servers/redis_topologies.py) and every process uses its ``redis+sentinel://`` URL. The Redis
faults of the plan (restart, crash, FLUSHALL) hit whichever data node the sentinels name primary
at that moment, and ``sentinel_failover`` SIGKILLs that primary, waits for the sentinels to promote
the replica, and starts the old primary again (the sentinels turn it into the new one's replica).
"""

from __future__ import annotations

import time

from tests.servers import SentinelSet
from tests.servers.procs import ServerFailedToStart


class SentinelRedis:
    """What the faults use of "the" Redis server (``url``, ``start``, ``restart``, ``kill``), on a
    Sentinel set: the current primary; plus ``failover`` and ``heal``."""

    def __init__(self, topology: SentinelSet):
        self.topology = topology

    @property
    def url(self) -> str:
        return self.topology.url

    def restart(self) -> None:
        self.topology.primary().restart()

    def kill(self) -> None:
        self.topology.primary().kill()

    def start(self) -> None:
        """Start every data node that is down (one that was primary comes back as it was; the
        sentinels demote it if they promoted the other meanwhile)."""
        for node in self.topology.data_nodes:
            node.start()

    def heal(self) -> None:
        """Every node up and the set healthy again (primary, replica in sync, three sentinels)."""
        self.topology.heal()

    def failover(self, timeout: float = 30.0) -> float | None:
        """SIGKILL the primary; once the sentinels name the replica primary, start the old one again.

        Returns the seconds the promotion took; None when the set was not ready for a failover (no
        replica in sync: nothing done, the plan tries again later). Raises ServerFailedToStart
        when the replica was not promoted within ``timeout`` (the old primary is started again)."""
        try:
            self.topology.wait_healthy(timeout=1.0)
        except ServerFailedToStart:
            return None
        old = self.topology.primary()
        old.kill()
        killed = time.monotonic()
        try:
            while self.topology.primary() is old:
                if time.monotonic() - killed > timeout:
                    raise ServerFailedToStart(f"the sentinels did not promote the replica within {timeout:g}s")
                time.sleep(0.05)
            return time.monotonic() - killed
        finally:
            old.start()  # promoted or not, a server the faults stopped comes back
