"""``docllm check PATH...``: documents reviewed in this process (the settings' reviewer, as ``eval``
builds it: the offline checks by default), written in a CI format, gated by the exit code.

Exit codes: 0 no finding at or above ``--fail-on``, 1 some, 2 a usage, configuration or
infrastructure error (one line on stderr, never a traceback)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from docllm.domain.errors import DocllmError
from docllm.domain.review.checking import Checked, Source, check_documents, failing, only_changed
from docllm.domain.review.report import SEVERITIES
from docllm.entrypoints.check_formats import FORMATS, writer

if TYPE_CHECKING:  # `docllm --help` imports this module: the container is imported when it runs
    from docllm.container import Container
    from docllm.domain.review.rubric import Rubric
    from docllm.settings import Settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("check", help="review files here and now, for CI: exit 1 on findings at --fail-on")
    c.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories of Markdown, text, HTML, PDF, DOCX")
    c.add_argument("--rubric", metavar="NAME", help="review with the rubric NAME.yaml of DOCLLM_RUBRICS_DIR")
    c.add_argument("--fail-on", choices=SEVERITIES, default="high", help="lowest severity that fails (default: high)")
    c.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    c.add_argument("--output", metavar="FILE", help="write the output there instead of stdout")
    c.add_argument("--sarif", metavar="FILE", help="also write SARIF there, from the same review")
    c.add_argument("--changed-from", metavar="REF", help="only findings on lines changed since this git ref")
    c.add_argument("--parallel", type=int, default=4, metavar="N", help="reviews at once (an LLM reviewer)")
    c.add_argument("--fleet", action="store_true", help="submit to the fleet (Redis, database, workers) and wait")
    c.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="--fleet: how long to wait")
    c.add_argument("--baseline", metavar="FILE", help="report only findings new against this earlier SARIF run")
    c.add_argument(
        "--ignore-marks", action="store_true", help="count findings a person dismissed (docllm findings) too"
    )
    c.add_argument("--tenant", type=_tenant, help="whose judgements apply (and whose tasks, with --fleet)")

    def one_line(message: str) -> None:  # a CI log gets one line, not argparse's usage block
        print(f"docllm check: {message} (docllm check --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)

    c.error = one_line


def _tenant(text: str) -> str:
    from docllm.domain.lanes.model import tenant_error

    reason = tenant_error(text)
    if reason:
        raise argparse.ArgumentTypeError(reason)
    return text


def run(args: argparse.Namespace) -> int:
    try:
        results = _checked(args)
        text = writer(args.format)(results, args.fail_on)
        if args.sarif:
            _write(args.sarif, writer("sarif")(results, args.fail_on))
        if args.output:
            _write(args.output, text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except SystemExit as exc:  # a bad setting: load_settings printed its line
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a gate's error is one line and exit 2, whatever raised it
        print(f"docllm: {_reason(exc)}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_FINDINGS if failing(results, args.fail_on) else EXIT_CLEAN


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # reports/docllm.sarif
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _reason(exc: BaseException) -> str:
    """Our own errors say what and where (a file, a rubric, a ref); anything else is named by its type."""
    text = " ".join(str(exc).split())
    if isinstance(exc, DocllmError | ValueError) and text:  # DocumentError is a ValueError
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _checked(args: argparse.Namespace) -> list[Checked]:
    from docllm.entrypoints.bootstrap import build_container, load_settings

    settings = replace(load_settings(), log_level="WARNING", metrics_port=None)
    changed = None
    if args.changed_from is not None:
        from docllm.adapters.vcs.git_diff import changed_lines

        changed = changed_lines(args.changed_from)
    baseline = None
    if args.baseline is not None:  # before any review: a bad file costs nothing
        from docllm.adapters.files.sarif_baseline import read_baseline

        baseline = read_baseline(args.baseline)
    if args.fleet:
        results = _in_fleet(args, settings, changed)
    else:
        container = build_container(settings)
        try:
            rubric = container.rubrics().get(args.rubric) if args.rubric is not None else None
            sources = _sources(args, settings.max_document_bytes, changed)
            results = asyncio.run(_review(container, sources, rubric, args.parallel))
        finally:
            container.shutdown_resources()
        results = results if changed is None else only_changed(results, changed)
    return _judged(args, settings, results, baseline)


def _judged(
    args: argparse.Namespace,
    settings: Settings,
    results: list[Checked],
    baseline: tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]] | None,
) -> list[Checked]:
    """Findings a person dismissed moved apart (docs/FINDINGS.md), then with ``--baseline`` only
    the new ones kept."""
    from docllm.domain.marks.checked import against_baseline, shared_names, with_marks

    if not args.ignore_marks:
        from docllm.entrypoints.check_marks import marks_for

        names = {r.source.name for r in results} | {r.source.path for r in results}
        marks = marks_for(settings, names, args.tenant or "")
        for name, paths in shared_names(results).items():
            if marks.get(name):
                print(
                    f"docllm check: {', '.join(paths)} share the name {name}: its marks are applied to neither "
                    f"(name the tasks by path: docllm submit --name {paths[0]})",
                    file=sys.stderr,
                )
        results = with_marks(results, marks)
    if baseline is not None:
        from docllm.adapters.files.sarif_baseline import where

        seen, every = baseline
        results = against_baseline(results, seen, lambda s: where(s.key), every)
    return results


def _sources(args: argparse.Namespace, limit: int, changed: dict[str, set[int]] | None) -> list[Source]:
    from docllm.adapters.files.documents import DocumentError, read_document
    from docllm.adapters.files.tree import expand, extracted_kind, printable, shown

    paths = [(p, shown(p)) for p in expand(args.paths)]
    if changed is not None:  # an unchanged file can have no finding on a changed line
        paths = [(p, s) for p, s in paths if s in changed]
    sources = []
    for path, key in paths:
        try:
            text, problem = read_document(path, limit), ""
        except DocumentError as exc:
            # empty: a clean document; anything else: a finding of its own (checking.unread)
            text, problem = "", "" if str(exc).endswith("the document is empty") else str(exc).split(": ", 1)[-1]
        lines = extracted_kind(path) is None
        sources.append(Source(printable(key), _name(printable(path)), text, lines, key=key, unreadable=problem))
    return sources


def _in_fleet(args: argparse.Namespace, settings: Settings, changed: dict[str, set[int]] | None) -> list[Checked]:
    from docllm.entrypoints.check_fleet import check_in_fleet

    if args.timeout <= 0:
        raise ValueError(f"--timeout must be above 0 seconds, got {args.timeout:g}")
    sources = _sources(args, settings.max_document_bytes, changed)
    results = check_in_fleet(settings, sources, args.rubric, args.timeout, args.tenant)
    return results if changed is None else only_changed(results, changed)


def _name(path: str) -> str:
    return os.path.basename(path)


async def _review(container: Container, sources: list[Source], rubric: Rubric | None, parallel: int) -> list[Checked]:
    from dependency_injector import providers

    # As eval: no Redis here, so no fleet rate limits, and the first deployment when there are several.
    container.rate_limiter.override(providers.Object(None))
    container.routes.override(providers.Object(None))
    reviewer = container.reviewer()  # built on the loop: an LLM client's pools belong to it
    try:
        return await check_documents(reviewer, sources, rubric, parallel)
    finally:
        close = getattr(reviewer, "close", None)
        if close is not None:
            await close()
