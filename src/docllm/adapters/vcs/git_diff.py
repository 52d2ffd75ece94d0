"""The lines changed since a git ref, per file, for ``docllm check --changed-from REF``: what
``git diff --unified=0 REF`` adds in the working tree, and every line of an untracked file."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence

from docllm.domain.errors import DocllmError

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_TIMEOUT_S = 60


class GitError(DocllmError):
    """git is missing, the directory is not a repository, or the ref is unknown."""


def _git(args: Sequence[str], cwd: str) -> str:
    try:
        done = subprocess.run(  # surrogateescape: a name that is not UTF-8 stays the file system's
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("--changed-from needs git, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {_TIMEOUT_S} s") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise GitError(f"git {next(a for a in args if not a.startswith('-') and '=' not in a)}: {reason}")
    return done.stdout


def changed_lines(ref: str, cwd: str | None = None) -> dict[str, set[int]]:
    """``{path relative to cwd (forward slashes): changed line numbers}``; a file that changed
    without added lines (only deletions, or a binary such as a DOCX) maps to an empty set."""
    cwd = os.path.abspath(cwd or os.getcwd())
    if ref.startswith("-"):
        raise GitError(f"{ref!r} is not a git ref")
    try:
        _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
    except GitError as exc:
        if "not a git repository" in str(exc):
            raise
        raise GitError(
            f"--changed-from {ref!r}: no such commit here (a shallow clone? fetch it: fetch-depth: 0)"
        ) from None
    # Every changed file, binaries (no hunks) and pure deletions too: its findings without a line stay.
    names = _git(["diff", "--name-only", "-z", "--no-ext-diff", "--relative", ref, "--"], cwd)
    changed: dict[str, set[int]] = {name: set() for name in names.split("\0") if name}
    # --no-prefix whatever diff.noprefix or diff.mnemonicPrefix say: the name is the path itself;
    # quotepath off: a non-ASCII name comes as it is (a name git still quotes is unquoted below).
    diff = ["-c", "core.quotepath=off", "diff", "--unified=0", "--no-color", "--no-ext-diff", "--no-prefix"]
    out = _git([*diff, "--relative", ref, "--"], cwd)
    current: set[int] | None = None
    for line in out.splitlines():
        if line.startswith("+++ "):
            name = line[4:].removesuffix("\t")  # git ends a name holding a space with a tab
            current = None if name == "/dev/null" else changed.setdefault(_unquote(name), set())
        elif current is not None and (m := _HUNK.match(line)):
            start, count = int(m.group(1)), int(m.group(2) or 1)
            current.update(range(start, start + count))
    for name in _git(["ls-files", "--others", "--exclude-standard", "-z"], cwd).split("\0"):
        if name:
            changed[name] = _all_lines(os.path.join(cwd, name))
    return changed


def _unquote(name: str) -> str:
    if name.startswith('"') and name.endswith('"'):  # git quotes unusual names, C-style
        raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
        return raw.decode("utf-8", "surrogateescape")
    return name


def _all_lines(path: str) -> set[int]:
    try:
        with open(path, "rb") as f:
            return set(range(1, f.read().count(b"\n") + 2))
    except OSError:
        return set()
