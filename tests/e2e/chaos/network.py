"""Network faults of a chaos run: every worker and reaper reaches Redis, MariaDB and the LLM test
server through links of its own (tests/servers/fault_proxy.py), and now and then one of them gets a
latency burst, a half-open link (past the lease for Redis), its connections reset, or the reply of a
MariaDB commit or of a Redis script dropped after the request ran. Each lasts a few seconds and is
healed; everything is healed when the faults stop.

With a Sentinel set (``SentinelRedis``) the processes reach Redis directly: the sentinels
hand out the data nodes' own addresses, so a proxy in front of them would not carry the data
connections. Then the Redis half-open link and the dropped script reply are not planned
(``kinds``); latency bursts and resets hit the MariaDB and LLM links only."""

from __future__ import annotations

import random
import time

from tests.e2e.chaos.counters import Counters
from tests.e2e.chaos.sentinel import SentinelRedis
from tests.servers import MariaDBServer, RedisServer
from tests.servers.fault_proxy import FaultProxy, Link
from tests.servers.wire import mysql_commit, redis_script

KINDS = ("net_latency", "net_blackhole", "net_reset", "net_drop_commit", "net_drop_script")
REDIS_ONLY = ("net_drop_script",)
COMMIT_SQL = r"SET status\s*=\s*'success'"


class NetworkFaults:
    def __init__(
        self,
        rng: random.Random,
        redis: RedisServer | SentinelRedis,
        mariadb: MariaDBServer,
        database_url: str,
        lease_s: float,
    ):
        self.rng, self.redis, self.mariadb, self.database_url, self.lease_s = rng, redis, mariadb, database_url, lease_s
        # the fault kinds this run can plan (not those of a Redis link when there is none)
        self.kinds = KINDS if isinstance(redis, RedisServer) else tuple(k for k in KINDS if k not in REDIS_ONLY)
        self.proxy = FaultProxy()
        self.llm_port = 0
        self.links: dict[str, dict[str, Link]] = {}  # process name -> redis/db/llm -> its link
        self.heal_at: dict[str, float] = {}  # process name -> when its links are healed

    def env(self, name: str) -> dict[str, str]:
        """The settings that route process ``name`` through its links (made on first use)."""
        if name not in self.links:
            p = self.proxy
            self.links[name] = {
                "db": p.link(f"{name}-db", self.mariadb.host, self.mariadb.port, "mysql"),
                "llm": p.link(f"{name}-llm", "127.0.0.1", self.llm_port),
            }
            if isinstance(self.redis, RedisServer):
                self.links[name]["redis"] = p.link(f"{name}-redis", self.redis.host, self.redis.port, "redis")
        links = self.links[name]
        return {
            "DOCLLM_REDIS_URL": f"redis://{links['redis'].address}/0" if "redis" in links else self.redis.url,
            "DOCLLM_DATABASE_URL": self.database_url.replace(f":{self.mariadb.port}/", f":{links['db'].port}/", 1),
            "DOCLLM_LLM_BASE_URL": f"http://{links['llm'].address}/v1",
        }

    def fault(self, what: str, name: str, count: Counters) -> str:
        """Put fault ``what`` on process ``name``'s links; returns what was done, for the log."""
        links, now = self.links[name], time.monotonic()
        if what == "net_latency":
            ms = self.rng.choice((200, 500, 1000))
            for link in links.values():
                link.latency(ms)
            self.heal_at[name] = now + self.rng.uniform(2.0, 5.0)
            count.net_latency_bursts += 1
            return f"{ms} ms on every link of {name}"
        if what == "net_blackhole":
            which = self.rng.choice(("redis", "db") if "redis" in links else ("db",))
            links[which].blackhole()
            self.heal_at[name] = now + self.lease_s + self.rng.uniform(0.5, 2.0)
            count.net_blackholes += 1
            return f"{name}'s {which} link half-open"
        if what == "net_reset":
            for link in links.values():
                link.reset()
            count.net_resets += 1
            return f"every connection of {name} reset"
        if what == "net_drop_commit":
            links["db"].drop_reply(mysql_commit(COMMIT_SQL))
        else:
            links["redis"].drop_reply(redis_script())
        # Armed until it fires (the next commit or script of that busy worker) or 30 s pass: a loaded
        # run once saw two drops armed for 10 s, none fired. Until then the process counts as
        # faulted (heal_at), so it is not the one a SIGTERM's stop-time check picks.
        self.heal_at[name] = now + 30.0
        return f"the next {'commit' if what == 'net_drop_commit' else 'script'} reply of {name} dropped"

    def heal_due(self, now: float, everyone: bool = False) -> None:
        for name, at in list(self.heal_at.items()):
            if everyone or now >= at:
                del self.heal_at[name]
                for link in self.links[name].values():
                    link.heal()
        if everyone:
            self.proxy.heal()

    def dropped_replies(self) -> int:
        return sum(link.stats["dropped_replies"] for links in self.links.values() for link in links.values())

    def close(self) -> None:
        self.proxy.close()
