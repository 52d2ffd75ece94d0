"""``docllm eval export --dismissed DIR``: the documents people judged (``docllm findings``, the
dashboard) written as a golden set, so that their judgements score the next prompt, model or
rubric with ``docllm eval DIR`` (docs/FINDINGS.md)."""

from __future__ import annotations

import argparse

from docllm.entrypoints.output import console, print_json


def export_dismissed(args: argparse.Namespace) -> int:
    from docllm.adapters.evaluation.export import write_golden_set
    from docllm.domain.marks.service import Judgements
    from docllm.entrypoints.commands import _container
    from docllm.entrypoints.output import CommandError

    with _container() as c:
        cases = Judgements(c.repository(), c.marks()).golden_set()
    if not cases:
        raise CommandError("no judged finding to export: dismiss some first (docllm findings dismiss TASK_ID N)")
    write_golden_set(args.dismissed, cases)
    summary = {
        "directory": args.dismissed,
        "documents": [
            {
                "file": d.file_name,
                "task_id": d.task_id,
                "expected": len(d.findings),
                "false_alarms": len(d.false_alarms),
            }
            for d in cases
        ],
    }
    if args.json:
        print_json(summary)
    else:
        expected = sum(len(d.findings) for d in cases)
        alarms = sum(len(d.false_alarms) for d in cases)
        console().print(
            f"wrote {len(cases)} document(s) to {args.dismissed}: {expected} expected finding(s), "
            f"{alarms} false alarm(s); score a reviewer on them with: docllm eval {args.dismissed}",
            markup=False,
            highlight=False,
        )
    return 0
