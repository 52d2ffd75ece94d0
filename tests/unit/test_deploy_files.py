"""The deployment files cannot be run here (no container engine): parse them and check them against
the settings, the CLI and docs/DEPLOY.md instead."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from docllm.entrypoints.cli import _parser
from docllm.runtime.http_endpoints import HttpEndpoints
from docllm.settings import SETTINGS_TABLE, Settings

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = set(SETTINGS_TABLE.values())
NAMED = re.compile(r"\b(DOCLLM_[A-Z_]+|PROCESSING_TIMEOUT_SECONDS)\b")
DOCLLM_SERVICES = ("init-db", "worker", "reaper")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _interpolated(value: object) -> str:
    """Compose's ``${VAR:-default}`` with nothing set in the environment."""
    return re.sub(r"\$\{[A-Z_]+(?::?-([^}]*))?\}", lambda m: m.group(1) or "", str(value))


def _instructions(dockerfile, name: str) -> list[str]:
    return [args for instr, args in dockerfile if instr == name]


# -- compose.yaml ---------------------------------------------------------------------------------


def test_compose_has_the_documented_services(compose):
    services = compose["services"]
    assert set(services) == {"redis", "mysql", "init-db", "worker", "reaper"}
    assert services["worker"]["deploy"]["replicas"] >= 2
    assert services["reaper"]["deploy"]["replicas"] == 1
    assert services["mysql"]["image"].startswith("mysql:8") and "healthcheck" in services["mysql"]
    for name in ("worker", "reaper"):
        needs = services[name]["depends_on"]
        assert needs["init-db"]["condition"] == "service_completed_successfully"
        assert needs["redis"]["condition"] == needs["mysql"]["condition"] == "service_healthy"
    assert services["init-db"]["restart"] == "no"


def test_compose_redis_keeps_its_data(compose):
    command = compose["services"]["redis"]["command"]
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags["--appendonly"] == "yes"
    assert flags["--maxmemory-policy"] == "noeviction"
    assert compose["services"]["redis"]["volumes"]


def test_compose_uses_only_real_settings_with_valid_values(compose):
    named = set(NAMED.findall((ROOT / "compose.yaml").read_text()))
    assert named <= VARIABLES, f"not settings: {sorted(named - VARIABLES)}"
    for name in DOCLLM_SERVICES:
        env = {k: _interpolated(v) for k, v in compose["services"][name]["environment"].items()}
        assert set(env) <= VARIABLES
        settings = Settings.from_env(env)  # raises SettingsError on a bad value
        assert settings.redis_url == "redis://redis:6379/0" and settings.database_url.startswith("mysql+pymysql://")
        assert settings.metrics_port is not None


def test_compose_commands_are_docllm_commands(compose):
    expected = {"init-db": "init-db", "worker": "worker", "reaper": "reaper"}
    for name, subcommand in expected.items():
        program, *argv = compose["services"][name]["command"]
        assert program == "docllm" and argv == [subcommand]
        _parser().parse_args(argv)


def test_compose_stop_timeout_exceeds_the_drain_grace(compose):
    worker = compose["services"]["worker"]
    grace = Settings.from_env({k: _interpolated(v) for k, v in worker["environment"].items()}).shutdown_grace_seconds
    assert float(worker["stop_grace_period"].rstrip("s")) > grace


# -- Dockerfile -----------------------------------------------------------------------------------


def test_dockerfile_shape(dockerfile, compose):
    assert dockerfile[0] == ("FROM", "python:3.11-slim")
    assert any(re.search(r"\bpip install \.", args) for args in _instructions(dockerfile, "RUN"))
    (user,) = _instructions(dockerfile, "USER")
    assert user not in ("root", "0")
    assert json.loads(_instructions(dockerfile, "CMD")[-1]) == ["docllm", "worker"]
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(_instructions(dockerfile, "ENV"))))
    docllm_env = {k: v for k, v in env.items() if NAMED.fullmatch(k)}
    assert set(docllm_env) <= VARIABLES
    Settings.from_env(docllm_env)
    port = docllm_env["DOCLLM_METRICS_PORT"]
    assert _instructions(dockerfile, "EXPOSE") == [port]
    assert compose["x-docllm"]["environment"]["DOCLLM_METRICS_PORT"] == port


def test_dockerfile_copies_what_exists(dockerfile):
    for args in _instructions(dockerfile, "COPY"):
        *sources, _ = args.split()
        for source in sources:
            if source == "README.md" and not (ROOT / source).exists():
                pytest.skip("README.md (pyproject's readme, needed by `pip install .`) is not written yet")
            assert (ROOT / source).exists(), source


def test_dockerignore_keeps_the_build_inputs():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", "tests", ".docllm"} <= ignored
    assert not ignored & {"src", "pyproject.toml", "README.md"}


@pytest.mark.parametrize("healthy, code", [(True, 0), (False, 1)])
def test_the_image_healthcheck_follows_healthz(dockerfile, healthy, code):
    """Run the HEALTHCHECK command itself against a live /healthz."""
    (args,) = _instructions(dockerfile, "HEALTHCHECK")
    assert "--interval" in args
    argv = json.loads(args.split("CMD", 1)[1])
    assert argv[:2] == ["python", "-c"] and "/healthz" in argv[2]
    problems = [] if healthy else ["reaper loop stalled"]
    endpoints = HttpEndpoints("127.0.0.1", 0, CollectorRegistry(), lambda: (healthy, problems), {}).start()
    try:
        done = subprocess.run(
            [sys.executable, "-c", argv[2]],
            env={"DOCLLM_METRICS_PORT": str(endpoints.port)},
            capture_output=True,
            timeout=30,
        )
    finally:
        endpoints.stop()
    assert done.returncode == code, done.stderr
    unset = subprocess.run([sys.executable, "-c", argv[2]], env={}, timeout=30)
    assert unset.returncode == 0  # metrics off (init-db): nothing to check


# -- docs/DEPLOY.md -------------------------------------------------------------------------------


def _settings_table(path: Path) -> dict[str, str]:
    """Variable -> default column of a settings table (rows ``| `VAR` | default | meaning |``)."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| ([^|]*) \|", path.read_text(), re.M)
    return {var: default.strip() for var, default in rows}


def _deploy_table() -> dict[str, str]:
    return _settings_table(ROOT / "docs" / "DEPLOY.md")


def test_deploy_doc_lists_every_setting_with_its_default():
    table = _deploy_table()
    assert set(table) == VARIABLES
    defaults = Settings()
    for name, var in SETTINGS_TABLE.items():
        default = getattr(defaults, name)
        if default in ("", None, ()):
            continue  # computed or off: described in words
        shown = re.fullmatch(r"`([^`]*)`", table[var])
        assert shown, f"{var}: default column {table[var]!r} should be `{default}`"
        if isinstance(default, (int, float)):
            assert float(shown.group(1)) == default, var
        else:
            assert shown.group(1) == default, var


def test_deploy_doc_names_only_real_settings_and_says_what_is_untested():
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    named = set(NAMED.findall(text))
    assert named <= VARIABLES, sorted(named - VARIABLES)
    for needed in (
        "noeviction",
        "appendonly yes",
        "{docllm}",
        "docllm init-db",
        "no container engine",
        "tests/unit/test_deploy_files.py",
    ):
        assert needed in text, needed


def test_readme_settings_agree_with_the_settings_and_deploy_doc():
    readme = ROOT / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not written yet")
    named = set(NAMED.findall(readme.read_text()))
    assert named <= VARIABLES, f"README names unknown settings: {sorted(named - VARIABLES)}"
    ours, theirs = _deploy_table(), _settings_table(readme)
    differ = {var: (theirs[var], ours[var]) for var in theirs.keys() & ours.keys() if theirs[var] != ours[var]}
    assert not differ, f"defaults differ between README.md and docs/DEPLOY.md: {differ}"
