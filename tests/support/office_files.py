"""PDF and DOCX files made in the tests: text PDFs written by hand (pypdf writes no text), Word files
with python-docx, and the bad ones submit must refuse (encrypted, scanned, damaged, zip bombs)."""

from __future__ import annotations

import io
import struct
import zipfile


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF whose page i shows the lines ``pages[i]`` in Helvetica (an empty list: a page without text)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(len(pages))), len(pages)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, lines in enumerate(pages):
        shown = [
            b"(%s) Tj T*" % line.encode("latin-1").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
            for line in lines
        ]
        content = b"\n".join([b"BT /F1 12 Tf 14 TL 72 720 Td", *shown, b"ET"]) if lines else b""
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    out = io.BytesIO(b"%PDF-1.4\n")
    out.seek(0, io.SEEK_END)
    offsets = []
    for no, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (no, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def encrypted_pdf(data: bytes, user_password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes(blocks: list[tuple[str, str]]) -> bytes:
    """A Word file of ``(kind, text)`` blocks: kind "h0".."h9" a heading, "p" a paragraph, a style name
    such as "List Bullet" a paragraph in it, "table" rows of ``;``-separated cells split on ``/``
    (a cell ``<`` is merged into the one on its left)."""
    import docx

    document = docx.Document()
    for kind, text in blocks:
        if kind.startswith("h") and kind[1:].isdigit():
            document.add_heading(text, int(kind[1:]))
        elif kind == "table":
            rows = [row.split(";") for row in text.split("/")]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    if cell == "<":  # merged with the cell on its left
                        table.cell(r, c - 1).merge(table.cell(r, c)).text = row[c - 1]
                    else:
                        table.cell(r, c).text = cell
        else:
            document.add_paragraph(text, style=None if kind == "p" else kind)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def with_member(docx: bytes, name: str, data: bytes) -> bytes:
    """The Word file with one more zip member (deflated: zeros shrink a thousandfold)."""
    out = io.BytesIO(docx)
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return out.getvalue()


def plain_zip(members: int) -> bytes:
    """A zip of ``members`` small text files and nothing of Word's."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for i in range(members):
            archive.writestr(f"part{i}.txt", "x")
    return out.getvalue()


def declare_size(archive: bytes, name: str, size: int) -> bytes:
    """The zip with ``name``'s uncompressed size rewritten to ``size`` in the central directory and the
    local header: a member that holds more than it declares."""
    data = bytearray(archive)
    encoded = name.encode()
    for signature, size_at, name_len_at, name_at in ((b"PK\x01\x02", 24, 28, 46), (b"PK\x03\x04", 22, 26, 30)):
        at = data.find(signature)
        while at != -1:
            (name_len,) = struct.unpack_from("<H", data, at + name_len_at)
            if bytes(data[at + name_at : at + name_at + name_len]) == encoded:
                struct.pack_into("<I", data, at + size_at, size)
            at = data.find(signature, at + 4)
    return bytes(data)
