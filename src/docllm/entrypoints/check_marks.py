"""Which judgements ``docllm check`` applies: the marks in the settings' database (the one
``docllm findings`` and the dashboard write). A run without a database of its own reads none:
the embedded SQLite file is read only when it exists, never created by a check."""

from __future__ import annotations

import os
from collections.abc import Collection

from docllm.domain.errors import DocllmError
from docllm.domain.marks.model import Mark
from docllm.settings import Settings


class MarksUnavailable(DocllmError):
    pass


def marks_for(settings: Settings, documents: Collection[str], tenant: str = "") -> dict[str, list[Mark]]:
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.marks import SqlAlchemyMarkStore

    url = settings.database_url
    if url.startswith("sqlite:") and not _sqlite_file_exists(url):
        return {}
    engine = make_engine(
        url, connect_timeout=settings.database_connect_timeout_seconds, io_timeout=settings.database_timeout_seconds
    )
    try:
        return SqlAlchemyMarkStore(engine).for_documents(documents, tenant)
    except Exception as exc:  # noqa: BLE001 - whatever the database said, one line and the way out
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise MarksUnavailable(
            f"the findings' marks could not be read ({why}); --ignore-marks checks without them"
        ) from None
    finally:
        engine.dispose()


def _sqlite_file_exists(url: str) -> bool:
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return bool(path) and path != ":memory:" and os.path.isfile(path)
