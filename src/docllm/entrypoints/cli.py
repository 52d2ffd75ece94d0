"""``docllm``: the command line. Exit codes: 0 success, 2 usage error, 1 anything else."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

from docllm.domain.errors import DocllmError
from docllm.domain.lanes.model import LANES, tenant_error
from docllm.entrypoints import check_command, findings_command
from docllm.entrypoints.output import CommandError
from docllm.entrypoints.processes import parse_processes
from docllm.entrypoints.task_ids import BadTaskId, parse_task_id

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def parse_tenant(text: str) -> str:
    reason = tenant_error(text)
    if reason:
        raise argparse.ArgumentTypeError(reason)
    return text


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="docllm", description="Reliable LLM document review worker.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("init-db", help="create or upgrade the schema (idempotent)")
    s = sub.add_parser("submit", help="queue one task per file")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--name", help="task name (default: the file name)")
    s.add_argument("--rubric", metavar="NAME", help="review with the rubric NAME.yaml of DOCLLM_RUBRICS_DIR")
    s.add_argument("--priority", choices=LANES, help="its lane (default: default); weights: DOCLLM_LANE_WEIGHTS")
    s.add_argument("--tenant", type=parse_tenant, help="who it is for: tenants are served in turn, under their caps")
    s.add_argument("--fresh", action="store_true", help="review every chunk again: nothing from the review cache")
    s.add_argument("--json", action="store_true")
    st = sub.add_parser("status", help="show tasks (default: the newest 50)")
    st.add_argument("task_ids", nargs="*", type=parse_task_id, metavar="TASK_ID")
    st.add_argument("--json", action="store_true")
    sa = sub.add_parser("stats", help="counts of tasks and queue depths")
    sa.add_argument("--json", action="store_true")
    sa.add_argument("--watch", action="store_true", help="live view, refreshed every second")
    sa.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)
    sa.add_argument("--iterations", type=int, default=0, help=argparse.SUPPRESS)
    d = sub.add_parser("dead", help="inspect and retry dead letters")
    dsub = d.add_subparsers(dest="dead_command", required=True, metavar="ACTION")
    dl = dsub.add_parser("list")
    dl.add_argument("--json", action="store_true")
    dl.add_argument("--limit", type=int, default=100)
    dr = dsub.add_parser("retry")
    target = dr.add_mutually_exclusive_group(required=True)
    target.add_argument("task_id", nargs="?", type=parse_task_id, metavar="TASK_ID")
    target.add_argument("--all", action="store_true")
    dr.add_argument("--json", action="store_true")
    dd = dsub.add_parser("discard", help="drop dead letters (the rows stay failed)")
    target = dd.add_mutually_exclusive_group(required=True)
    target.add_argument("task_id", nargs="?", type=parse_task_id, metavar="TASK_ID")
    target.add_argument("--all", action="store_true")
    dd.add_argument("--json", action="store_true")
    sh = sub.add_parser("show", help="one task and its report, for a person")
    sh.add_argument("task_id", type=parse_task_id, metavar="TASK_ID")
    sh.add_argument("--json", action="store_true")
    wk = sub.add_parser("workers", help="the live workers (processes that beat the registry)")
    wk.add_argument("--json", action="store_true")
    ca = sub.add_parser("cancel", help="cancel tasks: a pending one never runs, a running one stops")
    ca.add_argument("task_ids", nargs="+", type=parse_task_id, metavar="TASK_ID")
    ca.add_argument("--json", action="store_true")
    ca.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for running tasks to stop (default: lease + reaper interval + 5 s; 0: do not wait)",
    )
    bu = sub.add_parser("budget", help="the fleet's LLM spend today and its daily cap")
    bu.add_argument("--json", action="store_true")
    busub = bu.add_subparsers(dest="budget_command", metavar="ACTION")
    bs = busub.add_parser("set", help="hold a daily cap in Redis for every process (0: no cap)")
    bs.add_argument("--usd", type=_usd, required=True, metavar="N")
    bs.add_argument("--json", action="store_true")
    bc = busub.add_parser("clear", help="back to each process's DOCLLM_SPEND_CAP_USD_PER_DAY")
    bc.add_argument("--json", action="store_true")
    w = sub.add_parser("worker", help="run a worker (with the reaper and reconciler)")
    w.add_argument(
        "--processes",
        type=parse_processes,
        default=1,
        metavar="N|auto",
        help="run N worker processes under one parent (auto: one per usable CPU, the cgroup quota or the "
        "affinity mask, whichever is smaller; default 1, no parent)",
    )
    w.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)  # a child of --processes
    w.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)  # the child stops when it dies
    sub.add_parser("reaper", help="run the reaper and reconciler alone")
    demo = sub.add_parser("demo", help="show the worker surviving a SIGKILL, on embedded defaults")
    demo.add_argument("--workers", type=int, default=3)
    demo.add_argument("--dashboard", action="store_true", help="then serve the dashboard over the demo's data")
    ev = sub.add_parser(
        "eval",
        help="score the reviewer on a golden set: precision, recall and cost per document",
        epilog="docllm eval export --dismissed DIR: write the documents people judged as a golden set",
    )
    ev.add_argument("directory", metavar="DIR", help="documents, each beside its NAME.expected.yaml")
    ev.add_argument("--json", action="store_true")
    # `docllm eval export ...` (main() routes it here: eval's DIR would take the word "export")
    ex = sub.add_parser("eval export")
    ex.add_argument("--dismissed", required=True, metavar="DIR", help="a new or empty directory for the golden set")
    ex.add_argument("--json", action="store_true")
    check_command.add_parser(sub)
    findings_command.add_parser(sub)
    db = sub.add_parser("dashboard", help="serve the web dashboard (loopback unless DOCLLM_DASHBOARD_TOKEN is set)")
    db.add_argument("--host", default="127.0.0.1")
    db.add_argument("--port", type=int, default=8765)
    return p


def _usd(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an amount of USD >= 0")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["eval", "export"]:  # a golden set named "export" is ./export
        argv = ["eval export", *argv[2:]]
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for a usage error
        return int(exc.code or 0)
    except BadTaskId as exc:
        print(f"docllm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    handler = _handler(args)
    try:
        return handler(args) or EXIT_OK
    except (CommandError, DocllmError, ValueError, OSError) as exc:
        print(f"docllm: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


def _handler(args: argparse.Namespace) -> Callable[[argparse.Namespace], int | None]:
    if args.command == "check":  # its own exit codes (2 for any error); none of the other commands' imports
        return check_command.run
    from docllm.entrypoints import commands  # here: `docllm --help` need not import the container

    if args.command == "dead":
        return {"list": commands.dead_list, "retry": commands.dead_retry, "discard": commands.dead_discard}[
            args.dead_command
        ]
    if args.command == "findings":
        return findings_command.run
    if args.command == "eval":  # not the builtin's name
        return commands.evaluate
    if args.command == "eval export":
        from docllm.entrypoints.eval_export import export_dismissed

        return export_dismissed
    return getattr(commands, args.command.replace("-", "_"))


if __name__ == "__main__":
    raise SystemExit(main())
