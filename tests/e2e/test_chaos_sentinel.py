"""The short chaos run on a Sentinel set (CI; issue 15): the faults of ``test_chaos.py``, half as
long, with Redis as a primary, a replica and three sentinels. The Redis faults hit the current
primary and the primary is SIGKILLed once for a failover (the replica promoted, the old primary
back as its replica); the processes reach Redis through the sentinels, not through proxy links.
``scripts/chaos --sentinel`` runs it outside pytest. A file of its own so that ``--dist loadfile``
runs it beside ``test_chaos.py``, not after it. Set ``DOCLLM_CHAOS_SEED`` to replay a run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.chaos import Chaos, ChaosSettings, markdown
from tests.e2e.harness.clock_skew import require_libfaketime
from tests.servers import MariaDBServer, SentinelSet

pytestmark = pytest.mark.e2e


@pytest.mark.long(100)
def test_sentinel_chaos_run(
    sentinel_set: SentinelSet, sentinel_url: str, mariadb_server: MariaDBServer, mysql_url: str, tmp_path: Path
) -> None:
    require_libfaketime()
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
