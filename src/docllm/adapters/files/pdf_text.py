"""The text of a PDF (pypdf), one ``# page N`` heading per page, so a finding's location says ``page N``.

Refused: an encrypted PDF that needs a password (one encrypted with an empty user password, as for
print restrictions, is read), a PDF with no text layer (scans: OCR is not supported), a file pypdf
cannot parse, and text over the document limit (extraction stops there).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from docllm.adapters.files.extraction import DocumentError, TextBudget, literal, quiet, short_reason

if TYPE_CHECKING:
    from pypdf import PdfReader


def pdf_to_text(data: bytes, budget: TextBudget) -> str:
    from pypdf import PdfReader  # imported here: only a PDF pays for it

    has_text = False
    with quiet("pypdf"):
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not _opens_without_password(reader):
                raise DocumentError("the PDF is encrypted (it needs a password); submit an unprotected copy")
            for no, page in enumerate(reader.pages, 1):
                text = (page.extract_text() or "").strip("\n")
                budget.add(f"# page {no}")  # the heading a finding on this page is placed under
                if text.strip():
                    has_text = True
                    budget.add("\n".join(literal(line.rstrip()) for line in text.split("\n")))
        except DocumentError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes the parser raise, it is a damaged file
            raise DocumentError(f"not a readable PDF ({short_reason(exc)})") from None
    if not has_text:
        raise DocumentError("the PDF has no text layer (scanned pages?); OCR is not supported")
    return budget.text()


def _opens_without_password(reader: PdfReader) -> bool:
    try:
        return bool(reader.decrypt(""))
    except Exception:  # noqa: BLE001 - e.g. AES without the cryptography package: as good as locked
        return False
