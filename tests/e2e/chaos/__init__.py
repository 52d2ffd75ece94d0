"""The chaos scenario: the shipped programs under faults, as an operator would run them.

Real redis-server (AOF), real MariaDB (time zone +08:00), the OpenAI-compatible test server
(slow, some 429s and 500s) and several worker processes (``python -m docllm.entrypoints.worker``)
and reapers (``docllm reaper``), some with their wall clocks hours off (libfaketime). Documents go
in with ``docllm submit`` in waves while, at random moments, workers and reapers are SIGKILLed
and restarted, workers get SIGTERM or are frozen (SIGSTOP) past their lease and woken up again,
Redis is restarted and crashed, loses everything once
(FLUSHALL), MariaDB is restarted and crashed, a process's own network links (through the fault
proxy) get latency bursts, go half-open, are reset or lose the reply of a commit or a Redis script
that ran, and bad input arrives (malformed payloads pushed
straight to the ready list, rows deleted while their task is in flight, a 10 MB document).
With ``ChaosSettings(topology="sentinel")`` (``scripts/chaos --sentinel``) Redis is a Sentinel set
whose primary is also SIGKILLed for failovers (``sentinel``).

When the faults stop, within a bound computed from the settings (:meth:`ChaosSettings.settle_bound`)
every task must be ``success`` (only the 10 MB one ``failed``), nothing ``pending`` or
``processing``, the ready/processing/delayed structures empty, every report about its own
document, exactly one commit per task by the attempt that holds the row's fencing token (counted
by a database trigger and from the logs), every bad input in the dead-letter list or failed with a
reason, and no worker process dead on its own.

Used by ``tests/e2e/test_chaos.py`` (short) and ``scripts/chaos`` (``python -m tests.e2e.chaos``;
``--soak`` for 30 minutes and 5,000 tasks).

Modules: ``settings`` (the knobs and the settle bound), ``scenario`` (one run), ``workload`` (the
documents and their submits), ``faults`` (every fault and the restarts), ``network`` (each process's
links through the fault proxy, and their faults), ``bad_input``,
``sentinel`` (Sentinel mode: the faults on the current primary, the failover),
``sampling`` (measured while the faults go on), ``checks``, ``counters``, ``report`` (the summary as
Markdown), ``__main__`` (``scripts/chaos``). The names the tests use are importable from here.
"""

from tests.e2e.chaos.bad_input import MALFORMED, UNKNOWN_TASK_ID
from tests.e2e.chaos.report import markdown
from tests.e2e.chaos.scenario import Chaos, ChaosResult
from tests.e2e.chaos.settings import ChaosSettings

__all__ = ["MALFORMED", "UNKNOWN_TASK_ID", "Chaos", "ChaosResult", "ChaosSettings", "markdown"]
