"""Hostile review of issue 50 (the dashboard as an attacker and as an operator sees it). Real
Redis and MariaDB (test_dashboard's fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from docllm.entrypoints.dashboard.app import create_app
from docllm.entrypoints.dashboard.security import Access
from docllm.settings import Settings, SettingsError
from tests.integration.test_dashboard import TOKEN, World, world  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]


def _probes() -> list[tuple[str, str]]:
    docs = yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "base" / "dashboard.yaml").read_text())
    found = []
    for doc in docs:
        if doc and doc.get("kind") == "Deployment":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                for kind in ("readinessProbe", "livenessProbe"):
                    probe = container[kind]["httpGet"]
                    found.append((kind, probe["path"], probe.get("scheme", "HTTP")))
    return [(k, p) for k, p, scheme in found if scheme == "HTTP"]


def test_the_kubelet_probes_pass_on_a_dashboard_published_as_deploy_md_says(world: World):  # noqa: F811
    """DEPLOY.md (Kubernetes): "put an Ingress with TLS in front of the Service ... and set
    DOCLLM_DASHBOARD_TRUSTED_PROXIES=1 and DOCLLM_DASHBOARD_HTTPS=1". The kubelet probes the pod
    directly over plain HTTP (GET /login): 403, so the pod never becomes Ready and its liveness
    probe restarts it every minute. (`kubectl port-forward`, the documented way in, is refused too.)"""
    probes = _probes()
    assert probes, "the dashboard Deployment has plain-HTTP probes"
    app = create_app(world.sources, access=Access(token=TOKEN, https=True, trusted_proxies=1))
    kubelet = app.test_client()
    for kind, path in probes:
        answer = kubelet.get(path, headers={"User-Agent": "kube-probe/1.31", "Host": "10.244.1.7:8765"})
        assert 200 <= answer.status_code < 400, (kind, path, answer.status_code)


@pytest.mark.parametrize(
    "token",
    [
        "abcdefghabcdefghabcdefghabcdefgh",  # a pattern repeated: 8 distinct characters
        "0123456789abcdef0123456789abcdef",
        "my-dashboard-token-for-production",
    ],
)
def test_a_patterned_or_human_token_is_refused_like_a_placeholder(token: str):
    """The issue: "a token of at least 32 characters, not a placeholder". These pass the check."""
    with pytest.raises(SettingsError, match="DOCLLM_DASHBOARD_TOKEN"):
        Settings.from_env({"DOCLLM_DASHBOARD_TOKEN": token})


def test_an_ipv6_client_cannot_spread_its_guesses_over_its_own_prefix(world: World):  # noqa: F811
    """An IPv6 host holds a /64 (2^64 addresses): counted per /128, it has as many guesses as it
    likes. (On loopback the same holds for 127.0.0.0/8.)"""
    from docllm.entrypoints.dashboard.security import MAX_FAILURES

    app = create_app(world.sources, token=TOKEN)
    compared = 0
    for i in range(1, 3 * MAX_FAILURES + 1):
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = f"2001:db8:1:2::{i:x}"
        answer = client.get("/", headers={"Authorization": f"Bearer guess-{i:034d}"})
        compared += answer.status_code != 429
    assert compared <= MAX_FAILURES, f"{compared} wrong tokens compared from one /64"
