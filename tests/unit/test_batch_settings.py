"""The batch lane's settings (issue 28): read from the environment, refused with a message naming
the variable, batching on only where a deployment offers batches, the realtime claim leaving the
bulk lane to the batcher, and the lease rule (batch lease + its renewal period < task lease)."""

from __future__ import annotations

import json

import pytest

from docllm.settings import BATCH_WINDOW_SECONDS, Settings, SettingsError

OPENAI = {"DOCLLM_LLM_PROVIDER": "openai", "DOCLLM_LLM_API_KEY": "sk-x", "DOCLLM_DATABASE_URL": "sqlite:///x.db"}


def test_batching_is_off_by_default_and_every_lane_is_claimed_realtime():
    s = Settings.from_env(OPENAI)
    assert (s.llm_batch, s.batch_max_tasks, s.batch_max_wait_seconds, s.batch_poll_seconds) == (False, 500, 60, 30)
    assert s.batch_deployment is None and s.lane_policy.serves == ()


def test_the_single_url_form_offers_batches_and_the_realtime_claim_leaves_bulk():
    s = Settings.from_env({**OPENAI, "DOCLLM_LLM_BATCH": "on"})
    assert s.batch_deployment is not None and s.batch_deployment.batch
    assert s.lane_policy.serves == ("interactive", "default")
    assert (
        Settings.from_env({**OPENAI, "DOCLLM_LLM_BATCH": "on", "DOCLLM_LLM_PROVIDER": "offline"}).batch_deployment
        is None
    )


def test_a_deployment_with_batch_true_turns_batching_on():
    listed = [
        {"name": "a", "base_url": "http://a/v1", "api_key": "k", "model": "m"},
        {"name": "b", "base_url": "http://b/v1", "api_key": "k", "model": "m", "batch": True},
    ]
    s = Settings.from_env({**OPENAI, "DOCLLM_LLM_DEPLOYMENTS": json.dumps(listed)})
    assert s.batch_deployment is not None and s.batch_deployment.name == "b"
    with pytest.raises(SettingsError, match="DOCLLM_LLM_BATCH=True: is for the single-URL form"):
        Settings.from_env({**OPENAI, "DOCLLM_LLM_DEPLOYMENTS": json.dumps(listed), "DOCLLM_LLM_BATCH": "1"})


@pytest.mark.parametrize(
    "var, value, says",
    [
        ("DOCLLM_LLM_BATCH", "maybe", "DOCLLM_LLM_BATCH"),
        ("DOCLLM_BATCH_MAX_TASKS", "0", "DOCLLM_BATCH_MAX_TASKS=0: must be 1..50000"),
        ("DOCLLM_BATCH_MAX_WAIT_SECONDS", "-1", "DOCLLM_BATCH_MAX_WAIT_SECONDS=-1.0: must not be negative"),
        ("DOCLLM_BATCH_POLL_SECONDS", "0", "DOCLLM_BATCH_POLL_SECONDS=0.0: must be greater than 0"),
        ("DOCLLM_LEASE_SECONDS", "2", "DOCLLM_LEASE_SECONDS=2.0: must be at least 3 with batching on"),
    ],
)
def test_bad_batch_settings_are_refused_naming_the_variable(var, value, says):
    with pytest.raises(SettingsError, match=says):
        Settings.from_env({**OPENAI, "DOCLLM_LLM_BATCH": "on", var: value})


def test_the_lease_rule_and_the_processing_bound():
    s = Settings.from_env({**OPENAI, "DOCLLM_LLM_BATCH": "on"})
    # A poller that dies holds the batch lease one TTL; the next renews within one period more.
    assert s.batch_lease_seconds == pytest.approx(s.lease_seconds / 3)
    assert 2 * s.batch_lease_seconds < s.lease_seconds
    fast = Settings.from_env({**OPENAI, "DOCLLM_LLM_BATCH": "on", "DOCLLM_BATCH_POLL_SECONDS": "2"})
    assert fast.batch_lease_seconds == 2
    assert s.batch_bound_seconds == BATCH_WINDOW_SECONDS + 60 + 30 + s.lease_seconds + s.reaper_interval_seconds
