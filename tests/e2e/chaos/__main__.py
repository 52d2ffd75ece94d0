"""``scripts/chaos``: ``python -m tests.e2e.chaos [--soak] ...`` (see ``scripts/chaos`` for the options)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tests/e2e/chaos`
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.e2e import chaos  # noqa: E402
from tests.e2e.chaos.report import markdown  # noqa: E402
from tests.e2e.chaos.scenario import Chaos  # noqa: E402
from tests.e2e.chaos.settings import ChaosSettings  # noqa: E402
from tests.e2e.harness import find_libfaketime  # noqa: E402
from tests.servers import MariaDBServer, RedisServer, SentinelSet, ServerNotInstalled  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=(chaos.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--soak", action="store_true", help="30 minutes of faults and 5,000 tasks")
    parser.add_argument("--tasks", type=int, help="documents to submit (default 200, soak 5000)")
    parser.add_argument("--minutes", type=float, help="how long the faults go on (default 1, soak 30)")
    parser.add_argument(
        "--server-faults-every",
        type=float,
        metavar="SECONDS",
        help="a cycle of server faults this often (restart/crash of Redis and MariaDB, with --sentinel a "
        "failover too); default: each once (soak: every 180 s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="replay a run (default: random)")
    parser.add_argument(
        "--summary",
        type=Path,
        help="write the summary here: JSON, and Markdown next to it (.md); "
        "default with --soak: ./chaos-soak-summary.json",
    )
    parser.add_argument(
        "--sentinel",
        action="store_true",
        help="Redis as a Sentinel set (primary, replica, 3 sentinels) with failovers; no Redis proxy link",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, server data)")
    args = parser.parse_args(argv)

    settings = ChaosSettings.soak() if args.soak else ChaosSettings()
    if args.tasks:
        settings.tasks = args.tasks
    if args.minutes:
        settings.fault_seconds = args.minutes * 60
    settings.seed = args.seed
    if args.server_faults_every:
        settings.server_fault_every_s = args.server_faults_every
    if args.sentinel:
        settings.topology = "sentinel"
    if args.soak and not args.summary:
        args.summary = Path("chaos-soak-summary.json")
    if find_libfaketime() is None:
        print(
            "scripts/chaos: libfaketime is missing (apt-get install faketime, or run scripts/test once)",
            file=sys.stderr,
        )
        return 2

    workdir = Path(tempfile.mkdtemp(prefix="docllm-chaos-"))
    started = time.monotonic()
    try:
        redis_server: RedisServer | SentinelSet = (
            SentinelSet(workdir / "redis") if args.sentinel else RedisServer(workdir / "redis")
        )
        mariadb_server = MariaDBServer(workdir / "mariadb")
    except ServerNotInstalled as exc:
        print(f"scripts/chaos: {exc}", file=sys.stderr)
        return 2
    with redis_server, mariadb_server:
        url = mariadb_server.create_database("docllm_chaos")
        result = Chaos(settings, redis_server, mariadb_server, url, workdir, say=lambda m: print(m, flush=True)).run()
    command = "scripts/chaos " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(result.summary, command.strip())
    print(text)
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(result.summary | {"command": command.strip()}, indent=2) + "\n")
        args.summary.with_suffix(".md").write_text(text + "\n")
    print(
        f"{'PASSED' if result.ok else 'FAILED'} in {time.monotonic() - started:.0f}s; work directory {workdir}"
        + ("" if args.keep or not result.ok else " (removed)")
    )
    if result.ok and not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
