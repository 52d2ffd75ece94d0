"""Real docllm processes for the end-to-end and chaos tests, run as an operator runs them.

- ``env``: :func:`product_env`, the environment every docllm process gets (servers, queue prefix,
  short lease and intervals, JSON logs), without anything inherited from the caller's ``DOCLLM_*``.
- ``clock_skew``: :func:`skewed`, a process's wall clock hours off under libfaketime.
- ``process``: :class:`Proc`, one program (worker, reaper, LLM test server) with its own log file;
  SIGKILL, SIGTERM, restart; :func:`cpu_seconds`; :func:`tcp_ports` (which
  process a server's peer is).
- ``programs``: :class:`Harness`, starts workers (``python -m docllm.entrypoints.worker``) and
  reapers (``docllm reaper``), runs CLI commands as subprocesses and parses their JSON.
- ``logs``: every process's JSON log lines read back as events.
- ``probe``: :class:`Probe`, read-only looks at Redis and the database, straight from the test process.
- ``audit``: a database trigger that counts commits, apart from the product's own logs.
- ``documents``, ``llm``: documents to submit; the OpenAI-compatible test server as a process.
- ``waiting``: :func:`wait_until`, a deadline and a message instead of ``sleep``.

The names the tests use are importable from here.
"""

from tests.e2e.harness.audit import commits, install_commit_audit
from tests.e2e.harness.clock_skew import find_libfaketime, skewed
from tests.e2e.harness.documents import report_matches, write_documents
from tests.e2e.harness.env import FAST_SETTINGS, ROOT, docllm_argv, product_env
from tests.e2e.harness.llm import start_llm_server
from tests.e2e.harness.probe import Probe
from tests.e2e.harness.process import Proc, cpu_seconds, tcp_ports
from tests.e2e.harness.programs import CommandFailed, Harness
from tests.e2e.harness.waiting import wait_until

__all__ = [
    "FAST_SETTINGS",
    "ROOT",
    "CommandFailed",
    "Harness",
    "Probe",
    "Proc",
    "commits",
    "cpu_seconds",
    "docllm_argv",
    "find_libfaketime",
    "install_commit_audit",
    "product_env",
    "report_matches",
    "skewed",
    "start_llm_server",
    "tcp_ports",
    "wait_until",
    "write_documents",
]
