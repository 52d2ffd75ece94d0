"""The reference pages stay true to the code: docs/SETTINGS.md lists every setting with the default
the code has (and docs/DEPLOY.md's table agrees), and docs/CLI.md names every sub-command the CLI
has. The docs site itself (links, anchors, the nav) is checked by ``scripts/docs`` (mkdocs, strict)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from docllm.entrypoints.cli import _parser
from docllm.settings import SETTINGS_TABLE, Settings

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = set(SETTINGS_TABLE.values())
NAMED = re.compile(r"\b(DOCLLM_[A-Z_]+|PROCESSING_TIMEOUT_SECONDS)\b")
ROW = re.compile(r"^\| `([A-Z_]+)` \| ([^|]*) \|", re.M)


def _table(page: str) -> dict[str, str]:
    return {var: default.strip() for var, default in ROW.findall((ROOT / "docs" / page).read_text())}


def test_the_settings_page_lists_every_setting_with_the_codes_default() -> None:
    table = _table("SETTINGS.md")
    assert set(table) == VARIABLES, (sorted(VARIABLES - set(table)), sorted(set(table) - VARIABLES))
    defaults = Settings()
    for name, var in SETTINGS_TABLE.items():
        default = getattr(defaults, name)
        if default in ("", None, ()):
            continue  # computed or off: said in words
        shown = re.fullmatch(r"`([^`]*)`", table[var])
        assert shown, f"{var}: default column {table[var]!r} should be `{default}`"
        if isinstance(default, (int, float)):
            assert float(shown.group(1)) == default, var
        else:
            assert shown.group(1) == default, var
    named = set(NAMED.findall((ROOT / "docs" / "SETTINGS.md").read_text()))
    assert named <= VARIABLES, sorted(named - VARIABLES)


def test_the_settings_page_and_the_deploy_guide_agree_on_every_default() -> None:
    ours, theirs = _table("SETTINGS.md"), _table("DEPLOY.md")
    differ = {var: (ours[var], theirs[var]) for var in ours.keys() & theirs.keys() if ours[var] != theirs[var]}
    assert not differ


def test_the_cli_page_names_every_command() -> None:
    text = (ROOT / "docs" / "CLI.md").read_text()
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = [name for name in commands if f"`docllm {name}" not in text]
    assert not missing


def test_the_readme_links_only_to_files_that_exist() -> None:
    """The docs site's build checks docs/; the README lives outside it."""
    text = (ROOT / "README.md").read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t}
    assert targets, "no link found: the pattern is wrong"
    assert not [t for t in sorted(targets) if not (ROOT / t).exists()]


def test_the_readme_and_the_benchmarks_stay_short_enough_to_read() -> None:
    """Issue 49's measures: a README of at most 200 lines, one current benchmark run in at most 300."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    assert len((ROOT / "docs" / "BENCHMARKS.md").read_text().splitlines()) <= 300


def test_every_docllm_command_in_the_readme_parses() -> None:
    """The tour and "Run it" are typed by new users as they are: each `docllm ...` line must be a
    command the CLI accepts (a renamed flag or sub-command fails here, not on their screen)."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    lines = [line.split("#")[0].split(" 2>")[0].strip() for block in blocks for line in block.splitlines()]
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("docllm ")]
    assert len(commands) >= 8, commands
    for argv in commands:
        argv = ["FILE" if a == "FILE..." else a for a in argv]
        _parser().parse_args(argv)  # SystemExit (argparse's error) fails the test
