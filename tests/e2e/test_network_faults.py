"""Network faults between the processes and their servers, through the fault proxy
(tests/servers/fault_proxy.py): every worker and the reaper reach Redis, MariaDB and the LLM test
server through links of their own, so a test can cut, slow or trick one process's path.

One set of servers, workers and links serves the whole module (setting them up is most of its
cost); each test submits its own documents, and every one of them must end ``success``, committed
exactly once (the audit trigger), with a report about its own document:

- a worker partitioned from Redis (not from MariaDB) past its lease: the reaper reclaims its task,
  the other worker commits it, and the partitioned worker's late commit is refused by fencing;
- a worker's pooled MariaDB connections go half-open, and a connection goes half-open as it carries
  a COMMIT: the commit never arrives and the server keeps the transaction's row locks; the worker's
  read timeout fires, the server ends the idle transaction, and the retried commit lands;
- a MariaDB COMMIT that lands and whose reply is lost: the retried write finds it done;
- 200 ms added to every round trip on every link, with both workers committing;
- a SIGTERM while a worker's Redis and MariaDB links stop answering: the process exits by its
  stop's deadline (grace, then at most half a lease of releases) although port calls still block on
  their sockets, and its tasks are reclaimed and committed once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from docllm.runtime.supervisor import child_stop_seconds
from docllm.settings import Settings
from tests.e2e.harness import (
    Harness,
    Probe,
    Proc,
    commits,
    install_commit_audit,
    product_env,
    report_matches,
    start_llm_server,
    wait_until,
    write_documents,
)
from tests.servers import MariaDBServer, RedisServer
from tests.servers.fault_proxy import FaultProxy, Link
from tests.servers.wire import mysql_commit

pytestmark = pytest.mark.e2e

LEASE = 3.0
DB_TIMEOUT = 2.0
GRACE = 1.0
COMMIT_SQL = r"SET status\s*=\s*'success'"  # the product's commit (the UPDATE that makes a row success)


@dataclass
class Net:
    harness: Harness
    probe: Probe
    proxy: FaultProxy
    workdir: Path
    links: dict[str, dict[str, Link]] = field(default_factory=dict)  # process -> redis/db/llm -> link
    workers: dict[str, Proc] = field(default_factory=dict)
    batch: int = 0

    def every_link(self) -> list[Link]:
        return [link for links in self.links.values() for link in links.values()]

    def submit(self, count: int) -> dict[int, str]:
        """``count`` new documents; task id -> the heading its report must quote."""
        self.batch += 1
        folder = self.workdir / f"docs-{self.batch}"
        headings = write_documents(folder, count, tag=f"net{self.batch}")
        created = self.harness.submit(sorted(folder / name for name in headings))
        return {c["task_id"]: headings[c["task_name"]] for c in created}

    def all_done(self, tasks: dict[int, str], timeout: float) -> None:
        """Every task ``success``, committed exactly once, with a report about its own document."""

        def succeeded() -> dict | None:
            rows = self.probe.rows()
            return rows if all(rows[t]["status"] == "success" for t in tasks) else None

        rows = wait_until(
            succeeded,
            timeout,
            f"tasks {sorted(tasks)} to succeed",
            interval=0.2,
            on_timeout=lambda: f"{ {t: self.probe.rows(False)[t]['status'] for t in tasks} }\n{self.harness.dump()}",
        )
        audit = commits(self.probe)
        assert {t: len(audit.get(t, [])) for t in tasks} == dict.fromkeys(tasks, 1)
        assert all(report_matches(rows[t]["result"], heading) for t, heading in tasks.items())

    def committers(self, tasks: dict[int, str]) -> dict[int, str]:
        """task id -> the process whose attempt committed it (from the logs, once each is there)."""
        return {e["task_id"]: e["_proc"] for e in self.harness.logged("succeeded", tasks, 3 * DB_TIMEOUT + LEASE + 20)}


def _through(link: Link, url: str, port: int) -> str:
    return url.replace(f":{port}/", f":{link.port}/", 1)


@pytest.fixture(scope="module")
def net(
    redis_server: RedisServer, mariadb_server: MariaDBServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Net]:
    redis_server.start()
    mariadb_server.start()
    workdir = tmp_path_factory.mktemp("network-faults")
    db_name = f"t_network_faults_{uuid.uuid4().hex[:12]}"
    db_url = mariadb_server.create_database(db_name)
    settings = {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_API_KEY": "test-key",
        "DOCLLM_LLM_MODEL": "test-model",
        "DOCLLM_LLM_TIMEOUT_SECONDS": "30",  # a reply the proxy holds back still arrives
        "DOCLLM_DATABASE_TIMEOUT_SECONDS": str(DB_TIMEOUT),
        "DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS": str(DB_TIMEOUT),
        "DOCLLM_LEASE_SECONDS": str(LEASE),
        "DOCLLM_SHUTDOWN_GRACE_SECONDS": str(GRACE),
    }
    prefix = f"net-{uuid.uuid4().hex[:8]}"
    harness = Harness(workdir, product_env(redis_server.url, db_url, prefix, workdir / "home", **settings))
    probe = Probe(redis_server.url, db_url, prefix)
    proxy = FaultProxy()
    net = Net(harness, probe, proxy, workdir)
    try:
        _, llm_port = start_llm_server(harness)
        harness.init_db()
        install_commit_audit(probe)
        for name in ("w1", "w2", "reaper"):
            links = net.links[name] = {
                "redis": proxy.link(f"{name}-redis", redis_server.host, redis_server.port, "redis"),
                "db": proxy.link(f"{name}-db", mariadb_server.host, mariadb_server.port, "mysql"),
                "llm": proxy.link(f"{name}-llm", "127.0.0.1", llm_port),
            }
            env = {
                "DOCLLM_REDIS_URL": _through(links["redis"], redis_server.url, redis_server.port),
                "DOCLLM_DATABASE_URL": _through(links["db"], db_url, mariadb_server.port),
                "DOCLLM_LLM_BASE_URL": f"http://127.0.0.1:{links['llm'].port}/v1",
            }
            if name == "reaper":
                harness.reaper(name, env)
            else:
                net.workers[name] = harness.worker(name, env)
        wait_until(lambda: all(p.serving for p in harness.procs.values() if p.kind != "llm"), 60, "every process")
        yield net
    finally:
        harness.close()
        proxy.close()
        probe.close()
        mariadb_server.start()
        mariadb_server.drop_database(db_name)


@pytest.fixture(autouse=True)
def healed(net: Net, request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    net.proxy.heal()
    dead = [p.name for p in net.harness.procs.values() if not p.alive]
    assert not dead, f"died: {dead}\n{net.harness.dump()}"


def test_a_worker_partitioned_from_redis_past_its_lease_is_fenced_out(net: Net) -> None:
    for name in net.workers:  # every LLM reply held back until released
        net.links[name]["llm"].latency(60_000)
    [(task_id, heading)] = net.submit(1).items()
    lease = wait_until(
        lambda: next((x for x in net.probe.leases() if x.get("task_id") == task_id), None), 20, "a claim"
    )
    cut = next(name for name, proc in net.workers.items() if proc.worker_id == lease["holder"])
    other = next(name for name in net.workers if name != cut)
    wait_until(lambda: net.probe.rows(False)[task_id]["status"] == "processing", 10, "the attempt to start")
    wait_until(lambda: net.links[cut]["llm"].stats["connections"] >= 1, 10, "its LLM request")

    net.links[cut]["redis"].blackhole()  # no heartbeat gets through: the lease expires
    net.links[other]["llm"].latency(0)
    row = wait_until(
        lambda: (r := net.probe.rows(False)[task_id])["status"] == "success" and r,
        30,
        "the other worker to commit the reclaimed task",
        on_timeout=net.harness.dump,
    )
    assert row["attempt"] >= 2
    net.links[cut]["llm"].latency(0)  # the partitioned worker's answer arrives: it tries to commit
    stale = wait_until(
        lambda: [e for e in net.harness.events("stale_attempt") if e["task_id"] == task_id],
        20,
        "the late commit to be refused",
        on_timeout=net.harness.dump,
    )
    assert [(e["_proc"], e["attempt"], e["row_status"]) for e in stale] == [(cut, 1, "success")]
    assert net.committers({task_id: heading}) == {task_id: other}
    net.all_done({task_id: heading}, 5)


def test_half_open_database_connections(net: Net) -> None:
    net.links["w1"]["db"].blackhole(new=False)  # its pooled connections: the next use times out
    for name in net.workers:
        net.links[name]["db"].blackhole_at(mysql_commit(COMMIT_SQL))
    tasks = net.submit(4)
    net.all_done(tasks, 60)
    assert sum(net.links[name]["db"].stats["blackholed_requests"] for name in net.workers) >= 1


def test_a_commit_whose_reply_is_lost_after_it_landed(net: Net) -> None:
    for name in net.workers:
        net.links[name]["db"].drop_reply(mysql_commit(COMMIT_SQL))
    tasks = net.submit(4)
    net.all_done(tasks, 60)
    assert sum(net.links[name]["db"].stats["dropped_replies"] for name in net.workers) >= 1
    # The worker whose reply was lost recognised its own commit (else: stale_attempt, no succeeded).
    assert set(net.committers(tasks)) == set(tasks)


def test_200_ms_on_every_link(net: Net) -> None:
    for link in net.every_link():
        link.latency(200)
    tasks = net.submit(8)
    net.all_done(tasks, 90)
    assert set(net.committers(tasks).values()) == set(net.workers)  # both, the partitioned one too


def test_a_sigterm_while_redis_and_the_database_do_not_answer_ends_by_its_deadline(net: Net) -> None:
    for name in net.workers:  # every LLM reply held back: the attempts are in flight at the SIGTERM
        net.links[name]["llm"].latency(60_000)
    tasks = net.submit(2)
    wait_until(
        lambda: all(net.probe.rows(False)[t]["status"] == "processing" for t in tasks), 20, "both attempts to start"
    )
    for name in net.workers:  # heartbeats, releases and the registry's leave block on their sockets
        net.links[name]["redis"].blackhole(new=True)
        net.links[name]["db"].blackhole(new=True)
    sent = time.monotonic()
    for proc in net.workers.values():
        proc.terminate()
    # What the supervisor allows a child before SIGKILL: the grace, half a lease of releases at most,
    # a second for the registry, the exit watchdog and a margin for a loaded machine; well under
    # the 15 s socket timeout the interpreter's exit would otherwise wait for.
    bound = child_stop_seconds(Settings(shutdown_grace_seconds=GRACE, lease_seconds=LEASE))
    codes = {name: proc.wait(bound + 10.0) for name, proc in net.workers.items()}
    took = time.monotonic() - sent
    print(f"SIGTERMed workers exited in {took:.1f}s (bound {bound:g}s)")
    assert codes == dict.fromkeys(net.workers, 0), net.harness.dump()
    assert took < bound, f"the SIGTERMed workers took {took:.1f}s to exit (bound {bound:g}s)"
    net.proxy.heal()
    for proc in net.workers.values():
        proc.start()
    net.all_done(tasks, 60)
