"""deploy/kubernetes cannot be applied here (no cluster): render each overlay, validate every
document against the Kubernetes schemas of a pinned version (kubernetes-validate, offline) and the
KEDA documents against KEDA's own CRDs and scaler (a copy in tests/support/keda/), and check the
numbers against docllm's settings: the grace period against the worker's stop deadline, the probes
against the health port, the scaler's numbers against what the pods export, every Secret reference
against the overlay's example; and what an SRE needs before running them (rollout, disruption,
migration, hardening, placement, scraping).

The overlays are rendered by a loader of the few kustomize features they use (``namespace``,
``resources``, and ``patches`` that are strategic merges of whole files), so the test needs no
kubectl; where kubectl is installed, ``test_the_loader_renders_what_kustomize_renders`` checks the
loader against it."""

from __future__ import annotations

import copy
import os
import re
import secrets
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from docllm.adapters.telemetry.scaling import BUSY, WAITING
from docllm.entrypoints.cli import _parser
from docllm.runtime.supervisor import child_stop_seconds
from docllm.settings import SETTINGS_TABLE, Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("external", "embedded-demo")
KUBERNETES_VERSION = "1.30"  # pinned: a newer kubernetes-validate cannot change what passes
VARIABLES = set(SETTINGS_TABLE.values())
NAMED = re.compile(r"\b(DOCLLM_[A-Z_]+|PROCESSING_TIMEOUT_SECONDS)\b")
SECRET_NAME = re.compile(r"PASSWORD|TOKEN|API_KEY|SECRET", re.I)
URL_PASSWORD = re.compile(r"://[^/@\s]*:([^/@\s]+)@")  # scheme://user:PASSWORD@host
PLACEHOLDER = "CHANGE-ME"

Doc = dict[str, Any]

# -- a loader of the kustomize features the overlays use --------------------------------------------

# Lists that a strategic merge patch merges item by item (Kubernetes' patchMergeKey); every other
# list, and every list of a custom resource, is replaced whole.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
}
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "namespace", "resources", "patches"}


def _merge(base: Any, patch: Any, key: str = "") -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for k, v in patch.items():
            if v is None:
                merged.pop(k, None)
            elif k in merged:
                merged[k] = _merge(merged[k], v, k)
            else:
                merged[k] = _merge({}, v, k) if isinstance(v, dict) else _merge([], v, k)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        by = MERGE_KEYS[key]
        items, added = list(base), []
        for change in patch:
            at = next((i for i, item in enumerate(items) if item[by] == change[by]), None)
            if change.get("$patch") == "delete":
                assert at is not None, f"{key}: nothing named {change[by]} to delete"
                del items[at]
            elif at is None:
                added.append(copy.deepcopy(change))
            else:
                items[at] = _merge(items[at], change, key)
        return added + items  # kustomize puts the items a patch adds first
    return copy.deepcopy(patch)


def _identity(doc: Doc) -> tuple[str, str, str]:
    return doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else "", doc["kind"], doc["metadata"]["name"]


def _load(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def render(directory: Path) -> list[Doc]:
    """``kubectl kustomize DIRECTORY`` for the features the overlays use (anything else fails)."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert set(kustomization) <= KUSTOMIZATION_KEYS, (
        f"the loader does not know {set(kustomization) - KUSTOMIZATION_KEYS}"
    )
    docs: list[Doc] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        # kustomize loads a file only from within its kustomization's directory; a directory anywhere
        assert path.is_dir() or path.is_relative_to(directory.resolve()), f"{entry}: outside {directory}"
        docs += render(path) if path.is_dir() else _load(path)
    for entry in kustomization.get("patches", []):
        assert set(entry) == {"path"}, f"only whole-file strategic merge patches: {entry}"
        for patch in _load(directory / entry["path"]):
            matches = [i for i, doc in enumerate(docs) if _identity(doc) == _identity(patch)]
            assert len(matches) == 1, f"{entry['path']} patches {_identity(patch)}, found {len(matches)}"
            if patch.get("$patch") == "delete":
                del docs[matches[0]]
            else:
                docs[matches[0]] = _merge(docs[matches[0]], patch)
    if "namespace" in kustomization:  # every resource here is namespaced
        for doc in docs:
            doc["metadata"] = {**doc["metadata"], "namespace": kustomization["namespace"]}
    identities = [_identity(doc) for doc in docs]
    assert len(identities) == len(set(identities)), "a resource is defined twice"
    return docs


# -- what the rendered documents say ----------------------------------------------------------------


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def docs(overlay) -> list[Doc]:
    return render(KUBERNETES / "overlays" / overlay)


@pytest.fixture(scope="module")
def secret_example(overlay) -> Doc:
    (secret,) = _load(KUBERNETES / "overlays" / overlay / "secret.example.yaml")
    assert secret["kind"] == "Secret"
    return secret


def _one(docs: list[Doc], kind: str, name: str) -> Doc:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _pod_specs(docs: list[Doc]) -> list[tuple[Doc, Doc]]:
    """(owner, pod spec) of every Deployment and Job."""
    return [(d, d["spec"]["template"]["spec"]) for d in docs if d["kind"] in ("Deployment", "Job")]


def _containers(pod: Doc) -> list[Doc]:
    return pod.get("initContainers", []) + pod["containers"]


def _image_env() -> dict[str, str]:
    """The Dockerfile's ENV: what a container has before the manifest sets anything."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("ENV ")]
    return dict(re.findall(r"(\w+)=(\S+)", " ".join(lines)))


def container_env(container: Doc, docs: list[Doc], secret: Doc) -> dict[str, str]:
    """The environment a container starts with: the image's, its ConfigMaps', its own entries;
    Secret values are the overlay's example's (a reference to a key it lacks fails)."""
    env = _image_env()
    for source in container.get("envFrom", []):
        assert set(source) == {"configMapRef"}, f"{container['name']}: envFrom {source}"
        env.update(_one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        ref = entry["valueFrom"]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"], f"{entry['name']} names Secret {ref['name']}"
        if ref["key"] in secret["stringData"]:
            env[entry["name"]] = secret["stringData"][ref["key"]]
        else:
            assert ref.get("optional"), f"{entry['name']}: key {ref['key']} is not in secret.example.yaml"
    return env


def _settings(container: Doc, docs: list[Doc], secret: Doc) -> Settings:
    env = {k: v for k, v in container_env(container, docs, secret).items() if NAMED.fullmatch(k)}
    assert set(env) <= VARIABLES, f"not settings: {sorted(set(env) - VARIABLES)}"
    if env.get("DOCLLM_DASHBOARD_TOKEN", "").startswith(PLACEHOLDER):
        # The example's placeholder is refused at start (issue 50): the operator must set a real one.
        with pytest.raises(SettingsError, match="DOCLLM_DASHBOARD_TOKEN"):
            Settings.from_env(env)
        env["DOCLLM_DASHBOARD_TOKEN"] = secrets.token_hex(32)
    return Settings.from_env(env)  # raises SettingsError on a bad value


def _docllm_argv(container: Doc) -> list[str]:
    """The docllm arguments a container runs, directly or in its ``sh -c`` script."""
    command = container["command"]
    if command[:2] == ["sh", "-c"]:
        command = re.search(r"\bdocllm [^;>|&]*", command[2]).group(0).split()  # type: ignore[union-attr]
    assert command[0] == "docllm", command
    return command[1:]


def _worker(docs: list[Doc]) -> Doc:
    return _one(docs, "Deployment", "docllm-worker")


# -- schemas ----------------------------------------------------------------------------------------


def test_the_loader_renders_what_kustomize_renders(overlay, docs):
    """The loader is a stand-in for kustomize: where kubectl is installed, it must agree."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (the loader alone renders the overlays)")
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    theirs = {_identity(d): d for d in yaml.safe_load_all(done.stdout) if d}
    assert theirs == {_identity(d): d for d in docs}


def test_every_built_in_document_is_valid_kubernetes(docs):
    built_in = [d for d in docs if not d["apiVersion"].startswith("keda.sh/")]
    assert built_in
    for doc in built_in:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")


KEDA = ROOT / "tests" / "support" / "keda"  # KEDA's own files, v2.19.0 (its README says which)


def _strict(schema: Any) -> Any:
    """A CRD's openAPIV3Schema as JSON Schema that refuses unknown fields, as the API server's
    strict field validation (``kubectl apply``'s default) does; free-form maps stay free."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if (
        schema.get("type") == "object"
        and "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _crd_schema(name: str, directory: Path = KEDA, version_name: str = "v1alpha1") -> Doc:
    crd = yaml.safe_load((directory / name).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == version_name]
    assert version["served"] and version["storage"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: kubernetes-validate's part
    return schema


def _scaler_fields(go_file: str) -> dict[str, set[str] | None]:
    """The trigger metadata a KEDA scaler reads: ``keda:"name=X,order=triggerMetadata,...enum=a;b"``
    tags of its source, name -> allowed values (None: any)."""
    fields: dict[str, set[str] | None] = {}
    for tag in re.findall(r'keda:"([^"]*)"', (KEDA / go_file).read_text()):
        parts = dict(part.strip().partition("=")[::2] for part in tag.split(","))
        if parts.get("order") == "triggerMetadata":
            fields[parts["name"]] = set(parts["enum"].split(";")) if "enum" in parts else None
    return fields


def test_keda_documents_follow_kedas_crds_and_scaler(docs):
    schemas = {
        "ScaledObject": _crd_schema("keda.sh_scaledobjects.yaml"),
        "TriggerAuthentication": _crd_schema("keda.sh_triggerauthentications.yaml"),
    }
    metrics_api = _scaler_fields("metrics_api_scaler.go")
    assert {"url", "format", "valueLocation", "aggregationType"} <= set(metrics_api)  # the tags were read
    for doc in (d for d in docs if d["apiVersion"].startswith("keda.sh/")):
        assert doc["kind"] in schemas, doc["kind"]
        jsonschema.validate(doc, schemas[doc["kind"]])
        for trigger in doc["spec"].get("triggers", []):
            assert trigger["type"] == "metrics-api", trigger["type"]
            for key, value in trigger["metadata"].items():
                assert key in metrics_api, f"{trigger['name']}: KEDA's metrics-api scaler reads no {key!r}"
                allowed = metrics_api[key]
                assert allowed is None or value in allowed, f"{trigger['name']}: {key}={value!r}, not {allowed}"


def test_the_crd_check_refuses_what_kubectl_would():
    """The check can fail: a typo and a field of a newer KEDA are refused, as the API server would."""
    schema = _crd_schema("keda.sh_scaledobjects.yaml")
    docs = render(KUBERNETES / "overlays" / "external")
    scaler = copy.deepcopy(_one(docs, "ScaledObject", "docllm-worker"))
    jsonschema.validate(scaler, schema)
    for field, value in (("minReplicas", 1), ("fallback", {"replicas": 2})):  # typo; required field missing
        broken = copy.deepcopy(scaler)
        broken["spec"][field] = value
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


# -- the numbers agree with the settings --------------------------------------------------------------


def test_every_docllm_container_runs_a_real_command_with_valid_settings(docs, secret_example):
    for owner, pod in _pod_specs(docs):
        for container in _containers(pod):
            assert container["image"] == f"docllm:{_version()}", f"{owner['metadata']['name']}: {container['image']}"
            _parser().parse_args(_docllm_argv(container))
            settings = _settings(container, docs, secret_example)
            assert settings.warnings() == [], settings.warnings()
    named = {name for d in docs if d["kind"] == "ConfigMap" for name in d["data"]}
    assert named <= VARIABLES, sorted(named - VARIABLES)


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_worker_grace_period_outlasts_its_stop_deadline(docs, secret_example):
    pod = _worker(docs)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert _docllm_argv(container) == ["worker"]  # one process per pod: no --processes
    deadline = child_stop_seconds(_settings(container, docs, secret_example))
    assert pod["terminationGracePeriodSeconds"] > deadline


def _port(container: Doc, port: int | str) -> int:
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return number


def test_probes_ask_the_health_port(docs, secret_example):
    checked = 0
    for owner, pod in _pod_specs(docs):
        for container in pod["containers"]:
            argv = _docllm_argv(container)
            if argv[0] not in ("worker", "reaper", "dashboard"):
                continue
            if argv[0] == "dashboard":
                port, paths = int(argv[argv.index("--port") + 1]), ("/healthz", "/healthz")  # no token, HTTPS, Redis
            else:
                port, paths = _settings(container, docs, secret_example).metrics_port, ("/healthz", "/readyz")
            probes = (container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"])
            assert [p["path"] for p in probes] == list(paths), owner["metadata"]["name"]
            assert {_port(container, p["port"]) for p in probes} == {port}, owner["metadata"]["name"]
            checked += 1
    assert checked


def test_services_reach_a_port_that_serves(docs):
    for service in (d for d in docs if d["kind"] == "Service"):
        selected = [
            pod
            for owner, pod in _pod_specs(docs)
            if service["spec"]["selector"].items() <= owner["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert selected, service["metadata"]["name"]
        for pod in selected:
            (container,) = pod["containers"]
            for port in service["spec"]["ports"]:
                _port(container, port["targetPort"])  # a named port the container has


def _pods_of(docs: list[Doc], selector: dict[str, str]) -> list[Doc]:
    """The Deployments whose pods carry every label of ``selector``."""
    return [
        d
        for d in docs
        if d["kind"] == "Deployment" and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
    ]


def test_the_scaler_reads_the_fleets_signals_from_the_pods_that_export_them(overlay, docs, secret_example):
    scalers = [d for d in docs if d["kind"] == "ScaledObject"]
    if overlay == "embedded-demo":
        assert not scalers  # each pod would have its own queue
        return
    (scaler,) = scalers
    worker = _worker(docs)
    spec = scaler["spec"]
    assert spec["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert spec["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    # KEDA blind (every pod unready in an outage): the fleet keeps its size, never shrinks on a guess.
    assert spec["fallback"]["behavior"] == "currentReplicasIfHigher"
    assert spec["minReplicaCount"] <= spec["fallback"]["replicas"] <= spec["maxReplicaCount"]
    settings = _settings(worker["spec"]["template"]["spec"]["containers"][0], docs, secret_example)
    triggers = {t["name"]: t["metadata"] for t in spec["triggers"]}
    assert set(triggers) == {"waiting", "busy"}
    expected = {
        "waiting": (WAITING, "max", 2 * settings.concurrency, {"worker", "reaper"}),
        "busy": (BUSY, "sum", settings.concurrency, {"worker", "reaper"}),  # the reaper's: 0
    }
    for name, (signal, aggregation, target, exporters) in expected.items():
        meta = triggers[name]
        assert meta["valueLocation"] == signal.selector, name
        assert (meta["format"], meta["aggregateFromKubeServiceEndpoints"]) == ("prometheus", "true"), name
        assert meta["aggregationType"] == aggregation, name
        assert int(meta["targetValue"]) == target, name
        # The URL: a Service of this namespace (KEDA reads "<service>.<namespace>"), on the port the
        # pods serve /metrics on, selecting exactly the programs that export the number.
        url = re.fullmatch(r"http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)/metrics", meta["url"])
        assert url, meta["url"]
        service = _one(docs, "Service", url.group(1))
        assert url.group(2) == service["metadata"]["namespace"] == scaler["metadata"]["namespace"]
        (port,) = [p for p in service["spec"]["ports"] if p["port"] == int(url.group(3))]
        selected = _pods_of(docs, service["spec"]["selector"])
        assert {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in selected} == exporters, name
        for deployment in selected:
            pod = deployment["spec"]["template"]["spec"]
            (container,) = pod["containers"]
            assert _port(container, port["targetPort"]) == settings.metrics_port, name


def test_every_trigger_can_be_read_while_the_workers_are_at_zero():
    """A trigger whose Service selects only the scaled pods has no endpoint at zero workers: KEDA
    would report errors (and go to its fallback) all the while the fleet is idle. (Review of
    issue 47, hole 2.)"""
    docs = render(KUBERNETES / "overlays" / "external")
    (scaler,) = [d for d in docs if d["kind"] == "ScaledObject"]
    target = scaler["spec"]["scaleTargetRef"]["name"]
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    others = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] != target]
    for trigger in scaler["spec"]["triggers"]:
        url = trigger["metadata"]["url"]
        service = services[url.split("//", 1)[1].split(".", 1)[0]]
        running = _pods_of(others, service["spec"]["selector"])
        assert running, f"trigger {trigger['name']}: {service['metadata']['name']} has no pod while {target} is at zero"


def test_the_metrics_port_is_reached_by_keda_and_prometheus_only(overlay, docs):
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    if overlay == "embedded-demo":
        assert not policies
        return
    (policy,) = policies
    covered = _pods_of(docs, policy["spec"]["podSelector"]["matchLabels"])
    assert {d["metadata"]["name"] for d in covered} == {"docllm-worker", "docllm-reaper"}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    sources = {f["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for f in rule["from"]}
    assert sources == {"keda", "monitoring"}
    assert rule["ports"] == [{"protocol": "TCP", "port": 9464}]
    for deployment in covered:
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert _port(container, "http") == 9464


# -- Secrets: referenced, declared, never inlined -----------------------------------------------------


def _secret_references(docs: list[Doc]) -> list[tuple[str, str, bool]]:
    """(Secret name, key, optional) of every reference in the rendered documents."""
    refs = [
        (ref["name"], ref["key"], False)
        for d in docs
        if d["kind"] == "TriggerAuthentication"
        for ref in d["spec"]["secretTargetRef"]
    ]
    for _, pod in _pod_specs(docs):
        for container in _containers(pod):
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    refs.append((ref["name"], ref["key"], ref.get("optional", False)))
    return refs


def test_every_secret_reference_names_a_key_of_the_example(docs, secret_example):
    refs = _secret_references(docs)
    assert refs
    declared = secret_example["stringData"]
    for name, key, optional in refs:
        assert name == secret_example["metadata"]["name"], (name, key)
        assert key in declared or optional, f"{key} is not in secret.example.yaml"
    assert set(declared) <= {key for _, key, _ in refs}, "the example declares keys nothing reads"


def test_the_secret_example_holds_only_placeholders(secret_example):
    for key, value in secret_example["stringData"].items():
        if SECRET_NAME.search(key):
            assert value.startswith(PLACEHOLDER), key
        for password in URL_PASSWORD.findall(value):
            assert password.startswith(PLACEHOLDER), key


def test_no_secret_is_inlined(docs):
    assert not [d for d in docs if d["kind"] == "Secret"], "a Secret in the manifests would be applied as it is"
    literals = [(k, v) for d in docs if d["kind"] == "ConfigMap" for k, v in d["data"].items()]
    for _, pod in _pod_specs(docs):
        for container in _containers(pod):
            literals += [(e["name"], e["value"]) for e in container.get("env", []) if "value" in e]
    for name, value in literals:
        assert not SECRET_NAME.search(name), f"{name} is set inline: reference the Secret"
        assert not URL_PASSWORD.search(str(value)), f"{name} holds a URL with a password: reference the Secret"


# -- what each overlay runs ---------------------------------------------------------------------------


def test_the_external_fleet_migrates_first_and_runs_a_reaper():
    docs = render(KUBERNETES / "overlays" / "external")
    job = _one(docs, "Job", _init_db_job())
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert _docllm_argv(container) == ["init-db"]
    for name in ("docllm-worker", "docllm-reaper"):
        waits = _one(docs, "Deployment", name)["spec"]["template"]["spec"]["initContainers"]
        assert [_docllm_argv(c)[0] for c in waits] == ["stats"]  # stops at start while the schema is missing
        assert "until " in waits[0]["command"][2]
        assert f"job/{_init_db_job()}" in waits[0]["command"][2]  # names the Job to look at when it gives up
    assert _one(docs, "Deployment", "docllm-reaper")["spec"]["replicas"] == 1
    pdb = _one(docs, "PodDisruptionBudget", "docllm-worker")
    assert pdb["spec"]["selector"]["matchLabels"] == _worker(docs)["spec"]["selector"]["matchLabels"]
    assert _one(docs, "Deployment", "docllm-dashboard")


def test_the_embedded_demo_is_one_pod():
    docs = render(KUBERNETES / "overlays" / "embedded-demo")
    (secret_example,) = _load(KUBERNETES / "overlays" / "embedded-demo" / "secret.example.yaml")
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment", "Service"}
    worker = _worker(docs)
    assert worker["spec"]["replicas"] == 1 and worker["spec"]["strategy"] == {"type": "Recreate"}
    pod = worker["spec"]["template"]["spec"]
    settings = _settings(pod["containers"][0], docs, secret_example)
    assert settings.redis_url == "embedded" and settings.database_url.startswith("sqlite")
    assert settings.dashboard_on_worker and settings.dashboard_token  # served beyond loopback: token
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"home": _image_env()["DOCLLM_HOME"], "tmp": "/tmp"}  # the read-only root's two writable places


def test_deploy_doc_walks_through_the_overlays():
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    section = text.split("\n## Kubernetes", 1)[1].split("\n## ", 1)[0]
    for needed in [f"kubectl apply -k deploy/kubernetes/overlays/{o}" for o in OVERLAYS] + [
        "KEDA",
        "kubectl create secret generic docllm-secrets",
        "docllm-init-db",
        "tests/unit/test_kubernetes_manifests.py",
    ]:
        assert needed in section, needed


# -- what an SRE checks before running them ---------------------------------------------------------


def _init_db_job() -> str:
    """The migration Job's name carries the image's version: a new version is a new Job."""
    return "docllm-init-db-" + _version().replace(".", "-")


def test_a_rollout_never_removes_a_worker_before_its_replacement_is_ready():
    worker = _worker(render(KUBERNETES / "overlays" / "external"))
    strategy = worker["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0
    surge = strategy["rollingUpdate"]["maxSurge"]
    assert surge in (1, 2) or (isinstance(surge, str) and int(surge.rstrip("%")) <= 10), surge  # MySQL connections
    assert worker["spec"]["progressDeadlineSeconds"] > 0  # a stuck rollout says so


def test_a_node_drain_may_evict_workers_that_are_not_ready():
    pdb = _one(render(KUBERNETES / "overlays" / "external"), "PodDisruptionBudget", "docllm-worker")
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_the_migration_job_is_one_per_version_ends_and_suits_gitops():
    docs = render(KUBERNETES / "overlays" / "external")
    (job,) = [d for d in docs if d["kind"] == "Job"]
    assert job["metadata"]["name"] == _init_db_job()
    assert 0 < job["spec"]["activeDeadlineSeconds"] <= 3600
    assert "ttlSecondsAfterFinished" not in job["spec"]  # a GitOps sync would recreate a TTL-deleted Job
    annotations = job["metadata"]["annotations"]
    # Argo CD: recreated before each sync (any image), the sync waiting for it; Flux: recreated when
    # its template changed, instead of failing on the immutable field.
    assert annotations["argocd.argoproj.io/hook"] == "PreSync"
    assert annotations["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
    assert annotations["kustomize.toolkit.fluxcd.io/force"] == "Enabled"


OWN_IMAGE = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {external}
images:
  - name: docllm
    newName: registry.example.com/docllm
    newTag: {tag}
patches:
  - target:
      kind: Job
      name: docllm-init-db-0-12-0
    patch: |-
      - op: replace
        path: /metadata/name
        value: docllm-init-db-{tag}
"""


def test_an_image_of_your_own_gets_a_migration_job_of_its_own(tmp_path):
    """DEPLOY.md's overlay for an image of your own (a tag per build, a rebuild of the same
    version): each tag renames the Job, so `kubectl apply` never meets a changed pod template under
    an old name. Rendered by the real kustomize. (Review of issue 47, hole 3.)"""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    assert OWN_IMAGE.split("patches:")[1].replace("{tag}", "0-12-0-build-7") in text  # the doc's recipe
    jobs = []
    for tag in ("0-12-0-build-7", "0-12-0-build-8"):
        overlay = tmp_path / tag
        overlay.mkdir()
        external = os.path.relpath(KUBERNETES / "overlays" / "external", overlay)
        (overlay / "kustomization.yaml").write_text(OWN_IMAGE.format(external=external, tag=tag))
        done = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        (job,) = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "Job"]
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.example.com/docllm:{tag}"
        jobs.append(job["metadata"]["name"])
    assert jobs == ["docllm-init-db-0-12-0-build-7", "docllm-init-db-0-12-0-build-8"]


def _schema_wait(name: str) -> str:
    docs = render(KUBERNETES / "overlays" / "external")
    (wait,) = _one(docs, "Deployment", name)["spec"]["template"]["spec"]["initContainers"]
    return wait["command"][2]


@pytest.mark.parametrize("name", ["docllm-worker", "docllm-reaper"])
def test_the_schema_wait_gives_up_and_says_so(name, tmp_path):
    """The initContainer's script, run by sh with a `docllm` that always fails and a clock that
    moves 100 s per look: it ends with exit 1 and a line naming the Job (a silent Init for ever
    was the old behaviour)."""
    if shutil.which("sh") is None:
        pytest.skip("no sh")
    bin_dir, now = tmp_path / "bin", tmp_path / "now"
    bin_dir.mkdir()
    stubs = {
        "docllm": "#!/bin/sh\nexit 1\n",
        "sleep": "#!/bin/sh\nexit 0\n",
        # 100 s more at every call
        "date": f"#!/bin/sh\nn=$(cat {now} 2>/dev/null || echo 1000)\necho $((n + 100)) > {now}\necho $n\n",
    }
    for stub, text in stubs.items():
        (bin_dir / stub).write_text(text)
        (bin_dir / stub).chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", _schema_wait(name)],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"gave up after 600 s waiting for the schema: did the Job {_init_db_job()} succeed?" in done.stderr
    assert 4 <= done.stdout.count("waiting for the schema") <= 7  # it did wait, about 600 s of it


def test_pods_are_hardened(overlay, docs):
    for owner, pod in _pod_specs(docs):
        name = owner["metadata"]["name"]
        assert pod["automountServiceAccountToken"] is False, name  # docllm never calls the API server
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in _containers(pod):
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, (name, container["name"])
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert "emptyDir" in volumes[mounts["/tmp"]], (name, container["name"])  # Python's tempfile


def test_workers_spread_over_nodes_and_zones_and_are_not_cpu_throttled(docs):
    pod = _worker(docs)["spec"]["template"]["spec"]
    labels = _worker(docs)["spec"]["template"]["metadata"]["labels"]
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert set(spread) == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"  # one node is not the fleet
    for constraint in spread.values():
        assert constraint["maxSkew"] == 1
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
    for owner, spec in _pod_specs(docs):
        if owner["metadata"]["name"] in ("docllm-worker", "docllm-reaper"):
            for container in spec["containers"]:
                resources = container["resources"]
                assert "cpu" in resources["requests"] and "cpu" not in resources.get("limits", {}), owner["metadata"]
                assert "memory" in resources["limits"]


def test_prometheus_finds_the_pods_by_annotation_and_by_podmonitor(docs, secret_example):
    exporters = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] != "docllm-dashboard"]
    assert exporters
    for deployment in exporters:
        template = deployment["spec"]["template"]
        (container,) = template["spec"]["containers"]
        port = _settings(container, docs, secret_example).metrics_port
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert int(annotations["prometheus.io/port"]) == port
        assert annotations["prometheus.io/path"] == "/metrics"
    (monitor,) = render(KUBERNETES / "monitoring")
    assert monitor["kind"] == "PodMonitor" and monitor["metadata"]["namespace"] == docs[0]["metadata"]["namespace"]
    operator = ROOT / "tests" / "support" / "prometheus_operator"  # the operator's own CRD, v0.93.0
    jsonschema.validate(monitor, _crd_schema("monitoring.coreos.com_podmonitors.yaml", operator, "v1"))
    fleet = render(KUBERNETES / "overlays" / "external")
    scraped = _pods_of(fleet, monitor["spec"]["selector"]["matchLabels"])
    assert {d["metadata"]["name"] for d in scraped} == {"docllm-worker", "docllm-reaper"}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    for deployment in scraped:
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        _port(container, endpoint["port"])
    assert {"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "instance"} in endpoint["relabelings"]
