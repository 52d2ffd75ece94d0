"""Every numeric setting refuses inf, nan and out-of-range values at start, with one line naming it
(issue 43: DOCLLM_BATCH_MAX_WAIT_SECONDS=inf passed validation and crashed the batcher with
OverflowError). Generic: the numeric settings are found from the Settings fields, so one added
later is covered without a change here."""

from __future__ import annotations

from dataclasses import fields

import pytest

from docllm.settings import MAX_NUMBER, SETTINGS_TABLE, Settings, SettingsError

NUMERIC = sorted(f.name for f in fields(Settings) if f.type.split(" |")[0] in ("int", "float"))
URL = "sqlite:///docllm.db"
BAD = ("inf", "-inf", "nan", "Infinity", "1e30", str(10**30), "-1")


def test_the_numeric_settings_are_found():
    assert {"batch_max_wait_seconds", "lease_seconds", "max_handbacks", "llm_rpm", "metrics_port"} <= set(NUMERIC)
    assert len(NUMERIC) > 30


@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("raw", BAD)
def test_a_bad_number_in_the_environment_stops_the_program_with_one_line_naming_it(name, raw):
    var = SETTINGS_TABLE[name]
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({var: raw})
    message = str(caught.value)
    assert message.startswith(f"{var}=") and "\n" not in message, message


@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), MAX_NUMBER * 10, -1])
def test_a_bad_number_given_in_code_is_refused_by_validate(name, value):
    settings = Settings(database_url=URL, **{name: value})
    with pytest.raises(SettingsError) as caught:
        settings.validate()
    assert str(caught.value).startswith(f"{SETTINGS_TABLE[name]}="), str(caught.value)


def test_the_batch_wait_at_inf_is_refused_before_any_batcher_runs():
    with pytest.raises(SettingsError, match=r"^DOCLLM_BATCH_MAX_WAIT_SECONDS='?inf'?: must be a finite number"):
        Settings.from_env({"DOCLLM_BATCH_MAX_WAIT_SECONDS": "inf"})


def test_the_defaults_and_the_bounds_themselves_pass():
    Settings(database_url=URL).validate()
    Settings(database_url=URL, batch_max_wait_seconds=MAX_NUMBER, reconcile_grace_seconds=0).validate()
