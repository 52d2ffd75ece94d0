"""What an operator sees of the LLM breaker: settings validated at start, metrics, `docllm stats`."""

from __future__ import annotations

import pytest

from docllm.adapters.telemetry.metrics import Metrics, PrometheusEvents
from docllm.domain import events as ev
from docllm.domain.llm.breaker import BreakerState, BreakerView
from docllm.entrypoints import views
from docllm.settings import Settings, SettingsError


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("DOCLLM_BREAKER_FAILURE_RATIO", "0"),
        ("DOCLLM_BREAKER_FAILURE_RATIO", "1.5"),
        ("DOCLLM_BREAKER_MIN_CALLS", "0"),
        ("DOCLLM_BREAKER_OPEN_SECONDS", "0"),
        ("DOCLLM_BREAKER_WINDOW_SECONDS", "0.5"),
        ("DOCLLM_BREAKER_MIN_CALLS", "many"),
    ],
)
def test_bad_breaker_settings_stop_the_start_naming_the_variable(var, value):
    with pytest.raises(SettingsError, match=var):
        Settings.from_env({var: value})


def test_breaker_defaults():
    s = Settings.from_env({})
    assert (s.breaker_window_seconds, s.breaker_failure_ratio, s.breaker_min_calls, s.breaker_open_seconds) == (
        60.0,
        0.5,
        5,
        30.0,
    )


def test_transitions_are_counted_and_the_state_is_a_gauge():
    m = Metrics()
    sink = PrometheusEvents(m)
    sink.emit(ev.BREAKER, change="opened", worker="w1")
    sink.emit(ev.BREAKER_SEEN, state="open", worker="w1")
    value = m.registry.get_sample_value
    assert value("docllm_llm_breaker_transitions_total", {"to": "opened"}) == 1
    assert value("docllm_llm_breaker_state", {"state": "open"}) == 1
    assert value("docllm_llm_breaker_state", {"state": "closed"}) == 0


def test_stats_show_the_state_and_the_time_open():
    view = BreakerView(
        BreakerState.open, now_ms=100_000, calls=8, failures=6, opened_at_ms=40_000, transitions=3, open_ms_total=5_000
    )
    shown = views.breaker_json(view)
    assert shown == {
        "state": "open",
        "open_s": 60.0,
        "open_total_s": 65.0,
        "transitions": 3,
        "window_calls": 8,
        "window_failures": 6,
    }
