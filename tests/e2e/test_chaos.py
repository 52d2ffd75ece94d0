"""The short chaos run (CI): real servers and processes, faults for a minute, then every invariant.

The scenario and its checks are in ``tests/e2e/chaos/``; ``scripts/chaos`` runs the same outside
pytest, and ``scripts/chaos --soak`` for 30 minutes. Set ``DOCLLM_CHAOS_SEED`` to replay a run.
The second run is shorter, on a Sentinel set, with a failover of its primary (``--sentinel``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.chaos import Chaos, ChaosSettings, markdown
from tests.e2e.harness import find_libfaketime
from tests.servers import MariaDBServer, RedisServer, SentinelSet

pytestmark = pytest.mark.e2e


def _need_libfaketime() -> None:
    if find_libfaketime() is None:
        message = "libfaketime is not installed (scripts/test installs the faketime package)"
        if os.environ.get("CI", "").lower() in {"true", "1", "yes"}:
            pytest.fail(message)
        pytest.skip(message)


def test_short_chaos_run(
    redis_server: RedisServer, mariadb_server: MariaDBServer, mysql_url: str, tmp_path: Path
) -> None:
    _need_libfaketime()
    settings = ChaosSettings(seed=int(os.environ.get("DOCLLM_CHAOS_SEED", "0")))
    chaos = Chaos(settings, redis_server, mariadb_server, mysql_url, tmp_path)
    result = chaos.run()
    print(markdown(result.summary))
    assert result.ok, "\n".join(result.problems) + f"\nseed {result.summary['seed']}, logs in {tmp_path / 'logs'}"
    assert result.summary["tasks_submitted"] >= 100
    assert result.summary["kills"] >= 10
    f = result.summary["faults"]
    assert f["redis_flushes"] == 1 and f["redis_restarts"] >= 1 and f["mariadb_restarts"] >= 1
    assert f["worker_sigterms"] >= 1 and f["worker_pauses"] >= 1 and f["rows_deleted"] >= 1
    assert f["net_latency_bursts"] >= 1 and f["net_blackholes"] >= 1 and f["net_resets"] >= 1
    assert f["net_dropped_replies"] >= 1


def test_sentinel_chaos_run(
    sentinel_set: SentinelSet, sentinel_url: str, mariadb_server: MariaDBServer, mysql_url: str, tmp_path: Path
) -> None:
    """The same faults, half as long, on a Sentinel set: the Redis faults hit the current primary
    and the primary is SIGKILLed once for a failover (the replica promoted, the old primary back as
    its replica); the processes reach Redis through the sentinels, not through proxy links."""
    _need_libfaketime()
    settings = ChaosSettings(
        topology="sentinel",
        tasks=60,
        fault_seconds=30.0,
        min_kills=6,
        deleted_rows=2,
        # An attempt abandoned at a SIGTERM runs on until its LLM answer, which holds the process's
        # exit: with answers of up to 2.5 s, 2 of 4 runs on a loaded machine had a stop past grace + 5 s
        llm_latency_ms=(200, 1500),
        seed=int(os.environ.get("DOCLLM_CHAOS_SEED", "0")),
    )
    result = Chaos(settings, sentinel_set, mariadb_server, mysql_url, tmp_path).run()
    print(markdown(result.summary))
    assert result.ok, "\n".join(result.problems) + f"\nseed {result.summary['seed']}, logs in {tmp_path / 'logs'}"
    assert result.summary["by_status"].get("success", 0) >= 55 and result.summary["commits_max_per_task"] == 1
    f = result.summary["faults"]
    assert f["redis_failovers"] >= 1 and f["redis_restarts"] + f["redis_crashes"] >= 1 and f["redis_flushes"] == 1
    assert result.summary["kills"] >= 6 and f["mariadb_restarts"] >= 1
