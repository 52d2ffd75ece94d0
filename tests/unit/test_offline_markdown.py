"""The offline checks read Markdown as CommonMark and anchors as GitHub makes them (issue 48):
each shape a hand-written line rule got wrong, both ways."""

from __future__ import annotations

import pytest

from docllm.adapters.offline.checks.markdown import parse, slug
from docllm.adapters.offline.reviewer import OfflineReviewer


def findings(document: str) -> list[dict]:
    return OfflineReviewer().review_now("t", document)["findings"]


def broken(document: str) -> list[str]:
    return [f["quote"] for f in findings(document) if f["category"] == "links"]


@pytest.mark.parametrize(
    "heading, fragment",
    [
        ("## Use *fast* mode", "use-fast-mode"),
        ("## The `docllm check` command", "the-docllm-check-command"),
        ("## Deploy 🚀 now", "deploy--now"),
        ("## See [the API](https://example.com) first", "see-the-api-first"),
        ("## Über café", "über-café"),
        ("## Über café", "%C3%BCber-caf%C3%A9"),  # percent-encoded, as an editor writes it
        ("## C++ & Rust: 2024 edition?", "c--rust-2024-edition"),
        ("Setext *heading*\n================", "setext-heading"),
        ("Second setext\n-------------", "second-setext"),
        ('<a id="custom-place"></a>', "custom-place"),
        ('<a name="legacy"></a>', "legacy"),
        ('<p>Text with <span id="inline-id">an id</span></p>', "inline-id"),
        ("Para with <a id='quoted'></a> inline.", "quoted"),
    ],
)
def test_a_link_github_resolves_is_not_reported(heading, fragment):
    doc = f"# Title\n\nSee [it](#{fragment}).\n\n{heading}\n\nBody text.\n"
    assert broken(doc) == []


def test_repeated_headings_get_github_suffixes():
    links = "[a](#notes) [b](#notes-1) [c](#notes-2) [d](#notes-3)"
    doc = f"# T\n\n{links}\n\n## Notes\n\nx\n\n## Notes\n\ny\n\n## Notes\n\nz\n"
    assert broken(doc) == ["[d](#notes-3)"]


@pytest.mark.parametrize(
    "doc, says",
    [
        ("# T\n\n[x](#Setup)\n\n## Setup\n\nx\n", "differs in case from '#setup'"),
        ("# T\n\n[x](#logo)\n\n## ![logo](logo.png)\n\nx\n", "matches no heading"),  # image-only: no anchor
        ("# T\n\n[x](#not-heading)\n\n<div>\n###### Not heading\n</div>\n", "matches no heading"),
        ('# T\n\n[x](#Custom-Place)\n\n<a id="custom-place"></a>\n', "differs in case"),
    ],
)
def test_a_link_that_resolves_nowhere_is_reported(doc, says):
    [f] = [f for f in findings(doc) if f["category"] == "links"]
    assert says in f["message"] and f["location"]["line_start"] == 3


def test_top_and_line_fragments_always_resolve():
    assert broken("# T\n\n[up](#top) [line](#L12) [range](#L3-L9)\n") == []


def test_a_heading_inside_an_html_block_is_not_a_heading():
    parsed = parse("# T\n\n<div>\n###### Inside\n</div>\n\n## Real\n\nx\n")
    assert [(h.level, h.text) for h in parsed.headings] == [(1, "T"), (2, "Real")]
    assert not any("jumps" in f["message"] for f in findings("# T\n\n<div>\n###### Inside\n</div>\n"))


def test_line_numbers_are_the_sources_after_setext_headings_front_matter_and_html():
    doc = "---\ntitle: Guide\n---\n\nSetext\n======\n\n<div>\n<p>html</p>\n</div>\n\n"
    doc += "Step one. TODO finish.\n\n#### Deep\n\nx\n"
    found = {f["message"].split(":")[0]: f["location"]["line_start"] for f in findings(doc)}
    assert found == {"TODO marker": 12, "Heading level jumps from H1 to H4.": 14}


def test_front_matter_is_not_a_heading_and_its_title_is_the_h1():
    doc = "---\ntitle: Guide\nowner: docs\n---\n\n## Install\n\nRun it.\n"
    assert [h.text for h in parse(doc).headings] == ["Install"]
    assert findings(doc) == []  # MD001: the title is the H1, so an H2 first does not jump


def test_slug_keeps_letters_numbers_and_drops_punctuation():
    assert slug("Hello, World! 2 — ok_then") == "hello-world-2--ok_then"
    assert slug("日本語 見出し") == "日本語-見出し"


def test_a_link_in_a_table_cell_is_checked_on_its_row():
    doc = "# T\n\n| a | b |\n|---|---|\n| x | [y](#nope) |\n"
    [f] = findings(doc)
    assert f["location"]["line_start"] == 5 and "matches no heading" in f["message"]


def test_a_reference_definition_makes_the_reference_resolve_whatever_its_case():
    assert broken("# T\n\nRead [the guide][Guide  Book].\n\n[guide book]: https://example.com\n") == []


def test_the_link_check_runs_on_html_pages(tmp_path):
    from docllm.adapters.files.documents import read_document

    page = tmp_path / "notes.html"
    page.write_text(
        '<html><body><h1 id="release-2">Release 2</h1><p>See <a href="#fixes">fixes</a>, <a href="#box">the box</a>,'
        ' <a href="#old">old</a> and <a href="#known-issues">known issues</a>.</p>'
        '<h2 id="fixes">Fixes</h2><div id="box"><p>Text.</p></div><a name="old"></a>'
        "<h2>Known issues</h2><p>None.</p></body></html>"  # no id: a browser finds no #known-issues
    )
    text = read_document(page)
    assert broken(text) == ["[known issues](#known-issues)"]
    assert [h.text for h in parse(text).headings] == ["Release 2", "Fixes", "Known issues"]  # tags are not titles
