"""The login's `next` (issue 50, hole 1): whatever a client puts there, the browser that follows
the redirect stays on this site. The browser's reading is the WHATWG URL parser's, as far as it
matters here: leading and trailing C0 controls and spaces dropped, TAB/CR/LF dropped anywhere, a
backslash read as a slash."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from hypothesis import example, given
from hypothesis import strategies as st

from docllm.entrypoints.dashboard.redirects import safe_next

SITE = "https://dash.example/"


def as_a_browser_reads(location: str) -> str:
    cleaned = re.sub(r"[\t\n\r]", "", location.strip("".join(map(chr, range(0x21)))))
    return urljoin(SITE, cleaned.replace("\\", "/"))


@given(st.text(alphabet=st.sampled_from(list("/\\\t\r\n :@.?#%evil.xample") + ["\x00", "\x7f", "é"])))
@example("/\t/evil.example/login")
@example("/\\evil.example")
@example(" //evil.example")
def test_the_browser_stays_on_the_site(target: str):
    landed = urlsplit(as_a_browser_reads(safe_next(target)))
    assert (landed.scheme, landed.netloc) == ("https", "dash.example")


def test_a_path_here_is_kept():
    for path in ("/", "/tasks?status=failed", "/tasks/12", "/dead", "/batches/" + "a" * 32):
        assert safe_next(path) == path
