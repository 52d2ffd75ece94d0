"""A zip archive checked before a library unpacks it: its parts must unpack within a bound (zip bombs).

The sizes the central directory declares are added up and bounded; then every member is read through
once, in chunks. Python's zipfile stops a member at its declared size and checks its CRC there, so a
member that lies about its size (more data than declared) is refused as damaged before python-docx
opens it, and the bounded declared sizes are what any later read can unpack.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from docllm.adapters.files.extraction import DocumentError, short_reason

MAX_MEMBERS = 10_000  # a Word file has a few dozen parts
_CHUNK = 64 * 1024


def check_zip(data: bytes, max_unzipped: int, kind: str = "DOCX") -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise DocumentError(f"the {kind} has {len(members)} zip parts, over the bound of {MAX_MEMBERS}")
            declared = sum(m.file_size for m in members)
            if declared > max_unzipped:
                raise DocumentError(
                    f"the {kind}'s parts unpack to {declared} bytes, over the bound of {max_unzipped} (a zip bomb?)"
                )
            for member in members:  # a streamed read-through: memory stays at one chunk
                with archive.open(member) as part:
                    while part.read(_CHUNK):
                        pass
    except DocumentError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, ValueError, NotImplementedError) as exc:
        # damaged, encrypted (RuntimeError) or an unknown compression method (NotImplementedError)
        raise DocumentError(f"not a readable {kind} ({short_reason(exc)})") from None
