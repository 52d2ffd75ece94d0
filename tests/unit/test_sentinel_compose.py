"""compose.sentinel.yaml cannot be run here (no container engine): parse it, merge it over
compose.yaml as ``docker compose -f compose.yaml -f compose.sentinel.yaml`` does for environments,
and check the result against the settings."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from docllm.adapters.redis.urls import parse_redis_url
from docllm.settings import SETTINGS_TABLE, Settings

ROOT = Path(__file__).resolve().parents[2]


def _interpolated(value: object) -> str:
    return re.sub(r"\$\{[A-Z_]+(?::?-([^}]*))?\}", lambda m: m.group(1) or "", str(value))


def test_the_sentinel_override_points_every_docllm_service_at_three_sentinels() -> None:
    base = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    override = yaml.safe_load((ROOT / "compose.sentinel.yaml").read_text())["services"]
    sentinels = [name for name in override if name.startswith("sentinel-")]
    assert len(sentinels) == 3 and "redis-replica" in override
    script = override[sentinels[0]]["command"][-1]
    [(master, host)] = re.findall(r"sentinel monitor (\S+) (\S+) 6379 2", script)
    assert host in base and "--sentinel" in script
    for name in ("init-db", "worker", "reaper"):
        env = {k: _interpolated(v) for k, v in {**base[name]["environment"], **override[name]["environment"]}.items()}
        assert set(env) <= set(SETTINGS_TABLE.values())
        settings = Settings.from_env(env)
        target = parse_redis_url(settings.redis_url)
        assert target.kind == "sentinel" and target.master_name == master
        assert {h for h, _ in target.nodes} == set(sentinels)
        assert settings.warnings() == []  # the lease rides through the failover the file announces
