import pytest

from docllm.settings import SETTINGS_TABLE, Settings, SettingsError


def test_defaults_run_on_a_laptop():
    s = Settings.from_env({})
    assert s.redis_url == "embedded" and s.database_url.startswith("sqlite:///")
    assert s.llm_provider == "offline" and s.processing_timeout_seconds == 600
    assert s.queue_prefix == "docllm"


@pytest.mark.parametrize(
    "env, named",
    [
        ({"DOCLLM_LEASE_SECONDS": "-5"}, "DOCLLM_LEASE_SECONDS"),
        ({"DOCLLM_LEASE_SECONDS": "abc"}, "DOCLLM_LEASE_SECONDS"),
        ({"DOCLLM_CONCURRENCY": "2.5"}, "DOCLLM_CONCURRENCY"),
        ({"DOCLLM_CONCURRENCY": "0"}, "DOCLLM_CONCURRENCY"),
        ({"DOCLLM_LLM_PROVIDER": "gpt"}, "DOCLLM_LLM_PROVIDER"),
        ({"PROCESSING_TIMEOUT_SECONDS": "0"}, "PROCESSING_TIMEOUT_SECONDS"),
        ({"DOCLLM_MAX_ATTEMPTS": "many"}, "DOCLLM_MAX_ATTEMPTS"),
        ({"DOCLLM_REDIS_URL": "localhost:6379"}, "DOCLLM_REDIS_URL"),
        ({"DOCLLM_LOG_FORMAT": "xml"}, "DOCLLM_LOG_FORMAT"),
        ({"DOCLLM_LLM_PROVIDER": "openai"}, "DOCLLM_LLM_API_KEY"),
        ({"DOCLLM_DATABASE_TIMEOUT_SECONDS": "0"}, "DOCLLM_DATABASE_TIMEOUT_SECONDS"),
        ({"DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS": "-1"}, "DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS"),
        ({"DOCLLM_LANE_WEIGHTS": "interactive=8,default=3"}, "DOCLLM_LANE_WEIGHTS"),
        ({"DOCLLM_LANE_WEIGHTS": "interactive=8,default=3,bulk=0"}, "DOCLLM_LANE_WEIGHTS"),
        ({"DOCLLM_LANE_WEIGHTS": "urgent=8,default=3,bulk=1"}, "DOCLLM_LANE_WEIGHTS"),
        ({"DOCLLM_TENANT_MAX_IN_FLIGHT": "-1"}, "DOCLLM_TENANT_MAX_IN_FLIGHT"),
        ({"DOCLLM_TENANT_CAPS": "acme=four"}, "DOCLLM_TENANT_CAPS"),
        ({"DOCLLM_TENANT_CAPS": "a|b=2"}, "DOCLLM_TENANT_CAPS"),
    ],
)
def test_a_bad_setting_names_its_variable(env, named):
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env)


def test_api_key_from_openai_variable_and_never_shown():
    s = Settings.from_env({"DOCLLM_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-secret-123"})
    assert s.llm_api_key == "sk-secret-123"
    assert "sk-secret" not in repr(s)


def test_every_setting_has_a_variable():
    assert SETTINGS_TABLE["processing_timeout_seconds"] == "PROCESSING_TIMEOUT_SECONDS"
    assert all(v.startswith("DOCLLM_") for k, v in SETTINGS_TABLE.items() if k != "processing_timeout_seconds")


def test_urls_lose_their_passwords_in_repr_and_messages():
    s = Settings.from_env(
        {"DOCLLM_DATABASE_URL": "mysql+pymysql://u:hunter2@db/docllm", "DOCLLM_REDIS_URL": "redis://:sekret@r:6379/0"}
    )
    assert "hunter2" not in repr(s) and "sekret" not in repr(s)
    assert "mysql+pymysql://u:***@db/docllm" in repr(s)


def test_database_timeouts_reach_the_engine():
    import sqlalchemy as sa

    from docllm.container import Container

    env = {"DOCLLM_DATABASE_URL": "mysql+pymysql://u:p@db/x", "DOCLLM_DATABASE_TIMEOUT_SECONDS": "2.5"}
    container = Container()
    container.settings.override(Settings.from_env({**env, "DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS": "4"}))
    engine = container.engine()
    seen = {}

    def capture(dialect, record, cargs, cparams):  # what PyMySQL would get; no connection is made
        seen.update(cparams)
        raise RuntimeError("captured")

    sa.event.listen(engine, "do_connect", capture)
    try:
        with pytest.raises(RuntimeError, match="captured"):
            engine.connect()
        assert (seen["connect_timeout"], seen["read_timeout"], seen["write_timeout"]) == (4.0, 2.5, 2.5)
    finally:
        container.shutdown_resources()


def test_the_dashboard_on_the_worker_port_needs_loopback_or_a_token():
    port = {"DOCLLM_DASHBOARD_ON_WORKER": "1", "DOCLLM_METRICS_PORT": "9464"}
    with pytest.raises(SettingsError, match="DOCLLM_DASHBOARD_TOKEN"):
        Settings.from_env(port)  # the port binds 0.0.0.0 by default
    with pytest.raises(SettingsError, match="DOCLLM_METRICS_PORT"):
        Settings.from_env({"DOCLLM_DASHBOARD_ON_WORKER": "1", "DOCLLM_METRICS_HOST": "127.0.0.1"})
    with pytest.raises(SettingsError, match="DOCLLM_DASHBOARD_ON_WORKER"):
        Settings.from_env({"DOCLLM_DASHBOARD_ON_WORKER": "maybe"})
    assert Settings.from_env({**port, "DOCLLM_METRICS_HOST": "::1"}).dashboard_on_worker
    s = Settings.from_env({**port, "DOCLLM_DASHBOARD_TOKEN": "4d2f9e8a7c6b5a4938271605f4e3d2c1b0a9"})
    assert s.dashboard_on_worker and "4d2f9e8a" not in repr(s)
