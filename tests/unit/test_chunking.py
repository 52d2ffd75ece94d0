"""The Markdown outline and the split of a document into chunks that keep their place."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docllm.domain.review.chunking import Chunk, parse_outline, place_finding, split_markdown
from docllm.domain.review.report import finding

FENCE = "```"


def assert_in_place(doc: str, chunks, max_chars: int) -> None:
    lines = doc.split("\n")
    for c in chunks:
        assert len(c.text) <= max_chars
        assert c.text.split("\n") == lines[c.first_line - 1 : c.first_line - 1 + c.line_count]
    assert "\n".join(c.text for c in chunks) == doc


def test_the_outline_knows_heading_paths_and_ignores_hashes_in_code():
    doc = f"intro\n# A\n## B ##\n{FENCE}bash\n# not a heading\n{FENCE}\n### C\n## D\n#nospace\n~~~json\n{{"
    o = parse_outline(doc)
    assert [(h.level, h.text, h.line, h.path) for h in o.headings] == [
        (1, "A", 2, ("A",)),
        (2, "B", 3, ("A", "B")),
        (3, "C", 7, ("A", "B", "C")),
        (2, "D", 8, ("A", "D")),
    ]
    assert [(f.language, f.start, f.end) for f in o.fences] == [("bash", 4, 6), ("json", 10, None)]
    assert o.heading_path(1) == () and o.heading_path(5) == ("A", "B") and o.heading_path(11) == ("A", "D")
    assert o.code_lines() == {4, 5, 6, 10, 11}


def test_a_small_document_is_one_chunk():
    [chunk] = split_markdown("# A\n\ntext\n", 100)
    assert (chunk.text, chunk.first_line, chunk.heading_path) == ("# A\n\ntext\n", 1, ("A",))


def test_sections_are_packed_and_cut_before_headings():
    body = "Some text here.\n" * 5
    doc = "# Guide\n\n" + "".join(f"## Part {i}\n\n{body}\n" for i in range(5))
    chunks = split_markdown(doc, 250)
    assert len(chunks) > 1
    assert_in_place(doc, chunks, 250)
    assert all(c.text.startswith("#") for c in chunks)
    assert chunks[1].heading_path[0] == "Guide" and chunks[1].heading == " > ".join(chunks[1].heading_path)
    assert chunks[1].heading_path[-1] == chunks[1].text.split("\n")[0].lstrip("# ")


def test_an_overlong_section_is_cut_between_paragraphs_then_lines():
    paragraph = "A sentence of prose.\n" * 4
    doc = "# Long\n\n" + "\n".join([paragraph] * 6)
    chunks = split_markdown(doc, 200)
    assert_in_place(doc, chunks, 200)
    assert all(c.heading_path == ("Long",) for c in chunks)
    assert all(c.text.startswith(("# Long", "A sentence")) for c in chunks)


def test_a_line_longer_than_a_chunk_is_cut_and_keeps_its_line_number():
    doc = "# A\n" + "x" * 250 + "\nend"
    chunks = split_markdown(doc, 100)
    assert [c.first_line for c in chunks] == [1, 2, 2, 2]
    assert "".join(c.text for c in chunks[1:]).endswith("x\nend") and all(len(c.text) <= 100 for c in chunks)


def test_a_heading_inside_code_is_not_a_cut():
    code = "\n".join(f"# comment {i}" for i in range(10))
    doc = f"# Real\n\n{FENCE}bash\n{code}\n{FENCE}\n\n## Next\n\nText.\n"
    chunks = split_markdown(doc, 150)  # the whole is 156 characters
    assert [c.first_line for c in chunks] == [1, 16]


def test_max_chars_must_be_positive():
    with pytest.raises(ValueError):
        split_markdown("x", 0)


def test_a_finding_is_placed_in_the_whole_document():
    chunk = Chunk("## Setup\n\nRun make.\nThen test.", first_line=40, heading_path=("Guide", "Setup"))
    by_lines = place_finding(finding("clarity", "low", "m", line_start=3, line_end=4), chunk)
    assert by_lines["location"] == {"heading": "Guide > Setup", "line_start": 42, "line_end": 43}
    by_quote = place_finding(finding("code", "low", "m", heading="Setup", quote="Then test."), chunk)
    assert by_quote["location"] == {"heading": "Setup", "line_start": 43, "line_end": 43}
    guessed = place_finding(finding("code", "low", "m", line_start=9), chunk)  # the chunk has 4 lines
    assert guessed["location"] == {"heading": "Guide > Setup", "line_start": None, "line_end": None}


MARKDOWN_LINES = st.sampled_from(["# A", "## B ##", "   ### C", "#nospace", "text", "", FENCE, "~~~json", "# ", "#"])


@given(st.lists(MARKDOWN_LINES | st.text(max_size=12), max_size=12))
def test_a_document_of_one_chunk_is_split_as_its_outline_says(lines):
    """One chunk takes a short cut (no outline): its heading path is still the outline's at line 1."""
    doc = "\n".join(lines)
    (chunk,) = split_markdown(doc, max(1, len(doc)))
    assert chunk == Chunk(doc, 1, parse_outline(doc).heading_path(1))
