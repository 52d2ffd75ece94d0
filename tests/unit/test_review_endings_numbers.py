"""Review (issue 43, numeric settings): a value the settings accept must work, or the program
stops at start with one line naming it. DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS is accepted up to
MAX_NUMBER (1e9), but the MariaDB/MySQL driver refuses a connect timeout over 31536000 s (a year)
with a ValueError at every connect: the worker starts, then every database call fails with an
error that names no setting."""

from __future__ import annotations

import pytest
import sqlalchemy.exc

from docllm.adapters.sql.engine import make_engine
from docllm.settings import Settings, SettingsError

YEARS = "100000000"  # about three years: "wait as long as it takes", within the settings' 0..1e9


def test_a_connect_timeout_the_settings_accept_is_one_the_database_driver_accepts():
    env = {
        "DOCLLM_LLM_PROVIDER": "offline",
        "DOCLLM_DATABASE_URL": "mysql://docllm@127.0.0.1:1/docllm",
        "DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS": YEARS,
    }
    try:
        settings = Settings.from_env(env)
    except SettingsError as e:  # refused at start, naming it: fine
        assert "DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS" in str(e)
        return
    engine = make_engine(
        settings.database_url,
        connect_timeout=settings.database_connect_timeout_seconds,
        io_timeout=settings.database_timeout_seconds,
    )
    # Nothing listens on port 1: a connection error, as with any unreachable database; not a
    # ValueError from the driver about the setting's value.
    with pytest.raises(sqlalchemy.exc.OperationalError), engine.connect():
        pass
