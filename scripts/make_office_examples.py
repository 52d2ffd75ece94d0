"""Writes examples/docs/quickstart.pdf and examples/docs/admin-guide.docx: small files with known
problems, for `docllm submit` of PDF and Word files; and the PDF and Word documents of the eval
golden set, examples/eval/ (their expected findings are the .expected.yaml files beside them).
Run from the repository root:

    PYTHONPATH=. python scripts/make_office_examples.py

The files are committed; tests/unit/test_office_documents.py checks the findings they give, and
tests/integration/test_cli_eval.py the eval figures of the golden set.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.office_files import docx_bytes, pdf_bytes

DOCS = Path(__file__).resolve().parents[1] / "examples" / "docs"
EVAL = DOCS.parent / "eval"
LONG = (
    "If the server does not start after the installer has finished and you have already checked that the "
    "port is free and that the data directory belongs to the service user then you should read the log file "
    "and look for the first error that it shows before you try anything else."
)

QUICKSTART = [
    ["AcmeDB quickstart", "Install the package, start the server and connect with the client."],
    ["Configure", "Set the port in acmedb.conf.", "TODO: document the proxy settings.", *textwrap.wrap(LONG, 90)],
]

ADMIN_GUIDE = [
    ("Title", "AcmeDB administration"),
    ("h1", "Install"),
    ("p", "Install AcmeDB on each server."),
    ("h2", "Linux"),
    ("List Bullet", "Download the package."),
    ("List Bullet", "FIXME: name the package for Debian."),
    ("h2", "Windows"),
    ("h1", "Backup"),
    ("h3", "Schedule"),
    ("table", "Backup;When/full;Sunday/incremental;every night"),
    ("p", LONG),
]

# Golden documents: each problem is listed in its .expected.yaml, some only a model can see.
EVAL_QUICKSTART = [
    [
        "AcmeDB quickstart",
        "Install the package, then start the server.",
        "Lines that start with TODO in acmedb.conf are comments.",  # a term, not a marker (a trap)
    ],
    ["Configure", "Set the port in acmedb.conf.", "TBD: the proxy settings.", *textwrap.wrap(LONG, 90)],
]

EVAL_BACKUP_GUIDE = [
    ("Title", "AcmeDB backups"),
    ("h1", "Install"),
    ("p", "Install the backup agent on each server."),
    ("h2", "Linux"),
    ("List Bullet", "Download the agent."),
    ("List Bullet", "FIXME: name the package for Debian."),
    ("h2", "Windows"),
    ("h1", "Backup"),
    ("h3", "Schedule"),
    ("table", "Backup;When/full;Sunday/incremental;every night"),
    ("p", "Backups older than 30 days are deleted. Keep every backup for 90 days."),  # contradicts itself
]

EVAL_HANDBOOK = [
    ("Title", "Support handbook"),
    ("h1", "Tickets"),
    ("p", "Every ticket has a status. Tickets marked TBD have no owner yet; the FIXME label means a known bug."),
    ("h2", "Priorities"),
    ("table", "Priority;Answer within/P1;1 hour/P2;1 day"),
    ("h2", "Escalation"),
    ("p", "Escalate a P1 to the duty manager. TODO: add the duty manager's phone rota."),
    ("h1", "Tools"),
    ("h3", "Tracker"),
    ("p", "Lines that begin with TODO in a ticket template are instructions for the agent."),
    ("h2", "Chat"),
    ("h1", "Holidays"),
    (
        "p",
        "If you plan a holiday of more than a week during the busy season you should tell your team lead at "
        "least a month before and check on the team calendar that no other agent of your shift is away in the "
        "same weeks before you book anything.",
    ),
    ("h2", "Cover"),
    ("p", "Agree cover with the team lead."),
    ("h2", "Cover"),
    ("p", "Cover for public holidays is on the team calendar."),
]


def main() -> None:
    (DOCS / "quickstart.pdf").write_bytes(pdf_bytes(QUICKSTART))
    (DOCS / "admin-guide.docx").write_bytes(docx_bytes(ADMIN_GUIDE))
    (EVAL / "quickstart.pdf").write_bytes(pdf_bytes(EVAL_QUICKSTART))
    (EVAL / "backup-guide.docx").write_bytes(docx_bytes(EVAL_BACKUP_GUIDE))
    (EVAL / "support-handbook.docx").write_bytes(docx_bytes(EVAL_HANDBOOK))


if __name__ == "__main__":
    main()
