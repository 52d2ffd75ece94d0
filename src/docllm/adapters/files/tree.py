"""The files a path names for ``docllm check``: a file as it is, a directory expanded to the
documents ``submit`` reads (Markdown, text, HTML, PDF, DOCX), hidden and vendored folders skipped."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from docllm.adapters.files.documents import HTML_START
from docllm.adapters.files.extraction import DocumentError

DOCUMENT_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".txt", ".text", ".html", ".htm", ".pdf", ".docx"})
_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})


def expand(paths: Iterable[str]) -> list[str]:
    """Each file named, then each directory's documents in name order; no file twice. A path that
    does not exist is a DocumentError (a typo must not pass a gate by checking nothing)."""
    found: list[str] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            names = sorted(_walk(path))
        elif path.exists():
            names = [raw]
        else:
            raise DocumentError(f"{raw}: no such file or directory")
        for name in names:
            key = os.path.normpath(name)
            if key not in seen:
                seen.add(key)
                found.append(name)
    return found


def _walk(root: Path) -> Iterable[str]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        for name in files:
            if Path(name).suffix.lower() in DOCUMENT_SUFFIXES and not name.startswith("."):
                yield os.path.join(folder, name)


def shown(path: str, cwd: str | None = None) -> str:
    """``path`` relative to the working directory when it is inside it (SARIF's and the annotations'
    uris are), with forward slashes; else as given."""
    base = os.path.abspath(cwd or os.getcwd())
    full = os.path.abspath(path)
    if full == base or full.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, base).replace(os.sep, "/")
    return path.replace(os.sep, "/")


def printable(path: str) -> str:
    """A path as output can carry it: a name that is not UTF-8 (a Latin-1 file name) shows U+FFFD for
    its bad bytes instead of making the whole report unwritable."""
    return os.fsencode(path).decode("utf-8", "replace")


def extracted_kind(path: str) -> str | None:
    """The kind of a file whose reviewed text is extracted, so whose line numbers are not the file's
    ("pdf", "docx", "html"); None for Markdown and text, reviewed as they are."""
    suffix = Path(path).suffix.lower()
    kinds = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html"}
    if suffix in kinds:
        return kinds[suffix]
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
        return None
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "docx"
    return "html" if HTML_START.match(head.decode("utf-8", "replace").lstrip("\ufeff")) else None
