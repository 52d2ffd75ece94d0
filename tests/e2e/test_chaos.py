"""The short chaos run (CI): real servers and processes, faults for a minute, then every invariant.

The scenario and its checks are in ``tests/e2e/chaos/``; ``scripts/chaos`` runs the same outside
pytest, and ``scripts/chaos --soak`` for 30 minutes. Set ``DOCLLM_CHAOS_SEED`` to replay a run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.chaos import Chaos, ChaosSettings, markdown
from tests.e2e.harness.clock_skew import require_libfaketime
from tests.servers import MariaDBServer, RedisServer

pytestmark = pytest.mark.e2e


@pytest.mark.long(160)
def test_short_chaos_run(
    redis_server: RedisServer, mariadb_server: MariaDBServer, mysql_url: str, tmp_path: Path
) -> None:
    require_libfaketime()
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
