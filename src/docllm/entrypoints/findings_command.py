"""``docllm findings``: a person's judgement of a finding, kept for every later review of its
document (docs/FINDINGS.md). ``dismiss TASK_ID N``, ``restore TASK_ID N``, ``list``; the rules are
the domain's (``domain/marks/service.py``), shared with the dashboard's dismiss button."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from docllm.domain.marks.model import REASONS, Mark
from docllm.entrypoints.output import console, print_json
from docllm.entrypoints.task_ids import parse_task_id


def finding_number(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finding number (1 for the first: docllm show TASK_ID)")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("findings", help="judge a finding: dismissed ones stay so on later reviews of the document")
    fsub = f.add_subparsers(dest="findings_command", required=True, metavar="ACTION")
    d = fsub.add_parser("dismiss", help="dismiss finding N of a task's report (numbered as docllm show numbers them)")
    d.add_argument("task_id", type=parse_task_id, metavar="TASK_ID")
    d.add_argument("number", type=finding_number, metavar="N")
    d.add_argument("--reason", required=True, choices=REASONS, help="false-alarm, accepted or wont-fix")
    d.add_argument("--note", default="", metavar="TEXT", help="why, for whoever reads the report next")
    d.add_argument("--json", action="store_true")
    r = fsub.add_parser("restore", help="take the mark off finding N again: it counts from the next report")
    r.add_argument("task_id", type=parse_task_id, metavar="TASK_ID")
    r.add_argument("number", type=finding_number, metavar="N")
    r.add_argument("--json", action="store_true")
    ls = fsub.add_parser("list", help="the marks, newest first")
    ls.add_argument("--document", metavar="NAME", help="only this document's (its task name)")
    ls.add_argument("--json", action="store_true")


def mark_json(m: Mark) -> dict[str, Any]:
    return {
        "document": m.document,
        "tenant": m.tenant or None,
        "fingerprint": m.fingerprint,
        "rule": m.rule,
        "severity": m.severity,
        "heading": m.heading,
        "quote": m.quote,
        "message": m.message,
        "number": m.number,
        **m.shown(),
    }


def _who() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name (a container's uid without a passwd entry)
        return "cli"


def run(args: argparse.Namespace) -> int:
    from docllm.domain.errors import DocllmError
    from docllm.domain.marks.service import Judgements
    from docllm.entrypoints.commands import _container
    from docllm.entrypoints.output import CommandError

    with _container() as c:
        judgements = Judgements(c.repository(), c.marks())
        try:
            if args.findings_command == "list":
                return _list(c.marks().listed(args.document), args.json)
            if args.findings_command == "restore":
                removed = judgements.restore(args.task_id, args.number)
                _say(
                    args,
                    {"task_id": args.task_id, "number": args.number, "restored": removed},
                    f"finding {args.number} of task {args.task_id}: "
                    + ("restored: it counts again" if removed else "was not dismissed"),
                )
                return 0
            mark = judgements.dismiss(args.task_id, args.number, args.reason, args.note, _who())
        except DocllmError as exc:
            raise CommandError(str(exc)) from None
    _say(
        args,
        mark_json(mark),
        f"finding {args.number} of task {args.task_id} ({mark.document}): dismissed as "
        f"{mark.reason}; it stays dismissed on later reviews of {mark.document}",
    )
    return 0


def _say(args: argparse.Namespace, value: dict[str, Any], text: str) -> None:
    if args.json:
        print_json(value)
    else:
        console().print(text, markup=False, highlight=False)


def _list(marks: list[Mark], as_json: bool) -> int:
    if as_json:
        print_json([mark_json(m) for m in marks])
        return 0
    from rich.markup import escape
    from rich.table import Table

    table = Table("document", "tenant", "reason", "rule", "heading", "quote", "note", "by", "at")
    for m in marks:
        at = m.marked_at.strftime("%Y-%m-%d %H:%M") if m.marked_at else "-"
        cells = (m.document, m.tenant or "-", m.reason, m.rule, m.heading, m.quote[:60], m.note[:60], m.marked_by, at)
        table.add_row(*(escape(c) for c in cells))  # a note is the user's text, never rich markup
    console().print(table)
    return 0
