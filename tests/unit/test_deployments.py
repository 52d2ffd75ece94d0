"""DOCLLM_LLM_DEPLOYMENTS (ARCHITECTURE.md, Deployments): parsed at start, every error naming the
entry and the key; the single-URL settings are the list of one; and the fallback rule (``route``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docllm.domain.llm.breaker import BreakerState
from docllm.domain.llm.deployments import Deployment, route
from docllm.domain.llm.prices import Price, batch_price
from docllm.settings import Settings, SettingsError

EAST = {"name": "east", "base_url": "https://east.example/v1", "api_key": "sk-east-secret", "model": "m1"}
WEST = {"name": "west", "base_url": "http://west.example/v1", "api_key_env": "WEST_KEY", "model": "m2"}


def settings(deployments: object, **env: str) -> Settings:
    raw = deployments if isinstance(deployments, str) else json.dumps(deployments)
    return Settings.from_env({"DOCLLM_LLM_PROVIDER": "openai", "DOCLLM_LLM_DEPLOYMENTS": raw, **env})


def test_inline_json_with_every_key():
    full = {
        **EAST,
        "rpm": 60,
        "tpm": 10000,
        "prices": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
        "order": 2,
        "batch": True,
        "tags": {"region": "eu"},
    }
    s = settings([full, {**WEST, "order": 1}], WEST_KEY="sk-west")
    east, west = s.deployments
    assert east == Deployment(
        name="east",
        base_url="https://east.example/v1",
        model="m1",
        api_key="sk-east-secret",
        rpm=60,
        tpm=10000,
        price=Price(0.15, 0.6, 0.075),
        order=2,
        batch=True,
        tags={"region": "eu"},
    )
    assert west.api_key == "sk-west" and west.order == 1 and west.price is None
    assert "sk-east-secret" not in repr(s) and "sk-west" not in repr(s)


def test_a_deployment_may_give_its_own_batch_rates():
    rates = {"batch_input": 0.07, "batch_cached_input": 0.03, "batch_output": 0.3}
    (east,) = settings([{**EAST, "prices": {"input": 0.15, "output": 0.6, **rates}}]).deployments
    assert east.price == Price(0.15, 0.6) and east.batch_prices == rates
    assert batch_price(east.price, east.batch_prices) == Price(0.07, 0.3, 0.03)
    (west,) = settings([{**EAST, "prices": {"input": 0.15, "output": 0.6, "batch_output": 0.2}}]).deployments
    assert batch_price(west.price, west.batch_prices) == Price(0.075, 0.2)  # the others: half
    assert settings([EAST]).deployments[0].batch_prices == {}


def test_a_yaml_or_json_file(tmp_path):
    yaml_file = tmp_path / "deployments.yaml"
    yaml_file.write_text("- name: east\n  base_url: https://east.example/v1\n  api_key: k\n  model: m1\n  weight: 3\n")
    assert settings(str(yaml_file)).deployments[0].weight == 3.0
    json_file = tmp_path / "deployments.json"
    json_file.write_text(json.dumps([EAST]))
    assert settings(str(json_file)).deployments[0].name == "east"


def test_the_single_url_settings_are_a_list_of_one():
    s = Settings.from_env(
        {
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_API_KEY": "k",
            "DOCLLM_LLM_BASE_URL": "http://llm/v1",
            "DOCLLM_LLM_MODEL": "m",
            "DOCLLM_LLM_RPM": "30",
            "DOCLLM_LLM_PRICES": "m=1/2",
        }
    )
    (one,) = s.deployments
    assert (one.base_url, one.model, one.api_key, one.rpm, one.price) == ("http://llm/v1", "m", "k", 30, Price(1, 2))


@pytest.mark.parametrize(
    "entries, named",
    [
        ({"name": "x"}, "must be a non-empty list"),
        ([], "must be a non-empty list"),
        (["east"], "entry 1: must be an object"),
        ([{**EAST, "name": ""}], "entry 1: key 'name'"),
        ([{**EAST, "base_url": None}], "entry 1 ('east'): key 'base_url'"),
        ([{**EAST, "base_url": "east.example"}], "entry 1 ('east'): key 'base_url'"),
        ([{**EAST, "model": 3}], "entry 1 ('east'): key 'model'"),
        ([{k: v for k, v in EAST.items() if k != "api_key"}], "key 'api_key': give exactly one"),
        ([{**EAST, "api_key_env": "X"}], "key 'api_key': give exactly one"),
        ([{**EAST, "api_key": ""}], "key 'api_key': must be a non-empty"),
        ([EAST, {**WEST, "api_key_env": "NOT_SET"}], "entry 2 ('west'): key 'api_key_env'"),
        ([{**EAST, "rpm": 0}], "key 'rpm'"),
        ([{**EAST, "tpm": "many"}], "key 'tpm'"),
        ([{**EAST, "prices": {"input": 1}}], "key 'prices': output is required"),
        ([{**EAST, "prices": {"input": 1, "output": -1}}], "key 'prices': output must be"),
        ([{**EAST, "prices": {"input": 1, "output": 1, "cache": 1}}], "key 'prices': unknown price 'cache'"),
        ([{**EAST, "prices": "1/2"}], "key 'prices': must be an object"),
        ([{**EAST, "prices": {"input": 1, "output": 1, "batch_output": "half"}}], "key 'prices': batch_output must be"),
        ([{**EAST, "prices": {"input": 1, "output": 1, "batch_input": -0.5}}], "key 'prices': batch_input must be"),
        ([{**EAST, "prices": {"input": 1, "output": 1, "batch": 1}}], "key 'prices': unknown price 'batch'"),
        ([{**EAST, "prices": {"batch_input": 1, "batch_output": 1}}], "key 'prices': input is required"),
        ([{**EAST, "order": "first"}], "key 'order'"),
        ([{**EAST, "weight": 0}], "key 'weight'"),
        ([{**EAST, "order": 1, "weight": 1}], "key 'weight': give order or weight"),
        ([{**EAST, "weight": 1}, {**EAST, "name": "b"}], "entry 2 ('b'): key 'weight': set on some"),
        ([{**EAST, "batch": "yes"}], "key 'batch'"),
        ([{**EAST, "tags": "eu"}], "key 'tags'"),
        ([{**EAST, "region": "eu"}], "key 'region': unknown"),
        ([EAST, EAST], "entry 2 ('east'): key 'name': 'east' is used twice"),
        ("[not json", "is not valid JSON"),
        ("/no/such/file.yaml", "nor a readable file"),
    ],
)
def test_a_bad_entry_stops_the_start_naming_entry_and_key(entries, named):
    with pytest.raises(SettingsError, match="DOCLLM_LLM_DEPLOYMENTS") as caught:
        settings(entries)
    assert named in str(caught.value)
    assert "sk-east-secret" not in str(caught.value)  # inline JSON is never echoed: it holds keys


def test_a_bad_yaml_file_is_named(tmp_path):
    bad = tmp_path / "d.yml"
    bad.write_text("- name: [unclosed\n")
    with pytest.raises(SettingsError, match="is not valid YAML"):
        settings(str(bad))


# -- the fallback rule ------------------------------------------------------------------------

NAMES = ["a", "b", "c", "d"]
STATES = st.sampled_from(list(BreakerState))


@st.composite
def fleets(draw):
    n = draw(st.integers(1, 4))
    weighted = draw(st.booleans())
    deployments = [
        Deployment(
            name=NAMES[i],
            base_url=f"http://{NAMES[i]}/v1",
            model="m",
            order=draw(st.integers(0, 3)),
            weight=draw(st.floats(0.1, 10)) if weighted else None,
        )
        for i in range(n)
    ]
    states = {d.name: draw(STATES) for d in deployments}
    tried = draw(st.sets(st.sampled_from(NAMES[:n])))
    return deployments, states, tried, draw(st.floats(0, 1, exclude_max=True))


@given(fleets())
def test_route_never_repeats_a_try_and_passes_over_open_ones_while_another_is_left(fleet):
    deployments, states, tried, draw = fleet
    chosen = route(deployments, states, tried, draw)
    left = [d for d in deployments if d.name not in tried]
    if not left:
        assert chosen is None
        return
    assert chosen is not None and chosen.name not in tried
    healthy = [d for d in left if states[d.name] is not BreakerState.open]
    if healthy:
        assert chosen in healthy
        if chosen.weight is None:  # by order: none healthy comes before it
            assert chosen.order == min(d.order for d in healthy)
            assert chosen == next(d for d in healthy if d.order == chosen.order)
    else:
        assert chosen.order == min(d.order for d in left)


@given(fleets())
def test_a_chunk_tries_each_deployment_at_most_once_and_every_one_before_giving_up(fleet):
    deployments, states, _, draw = fleet
    tried: list[str] = []
    while (d := route(deployments, states, set(tried), draw)) is not None:
        tried.append(d.name)
    assert sorted(tried) == sorted(d.name for d in deployments)
    healthy = [d.name for d in deployments if states[d.name] is not BreakerState.open]
    assert set(tried[: len(healthy)]) == set(healthy)  # healthy ones first, open ones only after


def test_weights_share_the_chunks_in_proportion():
    a = Deployment(name="a", base_url="http://a/v1", model="m", weight=1)
    b = Deployment(name="b", base_url="http://b/v1", model="m", weight=3)
    picks = [route([a, b], {}, set(), i / 100).name for i in range(100)]
    assert picks.count("a") == 25 and picks.count("b") == 75
