"""deploy/kubernetes cannot be applied here (no cluster): render each overlay, validate every
document against the Kubernetes schemas of a pinned version (kubernetes-validate, offline) and the
KEDA documents against the fields of KEDA's CRDs, and check the numbers against docllm's settings:
the grace period against the worker's stop deadline, the probes against the health port, the
scaler's lists against the queue's keys, every Secret reference against the overlay's example.

The overlays are rendered by a loader of the few kustomize features they use (``resources``, and
``patches`` that are strategic merges of whole files), so the test needs no kubectl; where kubectl
is installed, ``test_the_loader_renders_what_kustomize_renders`` checks the loader against it."""

from __future__ import annotations

import copy
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

from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.urls import parse_redis_url
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
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "patches"}


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


# The fields of keda.sh/v1alpha1 that the manifests use, with the constraints of KEDA 2.x's CRDs
# (config/crd/bases/keda.sh_scaledobjects.yaml, keda.sh_triggerauthentications.yaml). Fields the CRDs
# have and these leave out are refused, like a typo would be.
_NAME_REF = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "labels": {"type": "object"}},
}
SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "kind": {"type": "string"},
                        "apiVersion": {"type": "string"},
                        "envSourceContainerName": {"type": "string"},
                    },
                },
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "advanced": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"horizontalPodAutoscalerConfig": {"type": "object"}},
                },
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "additionalProperties": False,
                        "properties": {
                            "type": {"type": "string", "minLength": 1},
                            "name": {"type": "string"},
                            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                            "authenticationRef": _NAME_REF,
                        },
                    },
                },
            },
        },
    },
}
TRIGGER_AUTHENTICATION = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "TriggerAuthentication"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "secretTargetRef": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["parameter", "name", "key"],
                        "additionalProperties": False,
                        "properties": {
                            "parameter": {"type": "string"},
                            "name": {"type": "string"},
                            "key": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
}
# redis-sentinel: the list and its target are required; the rest comes from the TriggerAuthentication.
SENTINEL_TRIGGER = {"listName", "listLength"}
SENTINEL_METADATA = SENTINEL_TRIGGER | {"activationListLength", "databaseIndex", "enableTLS", "unsafeSsl"}
SENTINEL_AUTH = {"addresses", "sentinelMaster", "password", "username", "sentinelUsername", "sentinelPassword"}


def test_keda_documents_follow_the_crds(docs):
    schemas = {"ScaledObject": SCALED_OBJECT, "TriggerAuthentication": TRIGGER_AUTHENTICATION}
    for doc in (d for d in docs if d["apiVersion"].startswith("keda.sh/")):
        assert doc["kind"] in schemas, doc["kind"]
        jsonschema.validate(doc, schemas[doc["kind"]])
        if doc["kind"] == "ScaledObject":
            for trigger in doc["spec"]["triggers"]:
                assert trigger["type"] == "redis-sentinel"
                assert SENTINEL_TRIGGER <= set(trigger["metadata"]) <= SENTINEL_METADATA, trigger["metadata"]
        else:
            assert {ref["parameter"] for ref in doc["spec"]["secretTargetRef"]} <= SENTINEL_AUTH


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
        assert len(selected) == 1, service["metadata"]["name"]
        (container,) = selected[0]["containers"]
        for port in service["spec"]["ports"]:
            _port(container, port["targetPort"])  # a named port the container has


def test_the_scaler_watches_the_queue_of_the_workers(overlay, docs, secret_example):
    scalers = [d for d in docs if d["kind"] == "ScaledObject"]
    if overlay == "embedded-demo":
        assert not scalers  # each pod would have its own queue
        return
    (scaler,) = scalers
    worker = _worker(docs)
    assert scaler["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert scaler["spec"]["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    assert 1 <= scaler["spec"]["minReplicaCount"] <= scaler["spec"]["maxReplicaCount"]
    settings = _settings(worker["spec"]["template"]["spec"]["containers"][0], docs, secret_example)
    keys = RedisKeys(settings.queue_prefix)
    target = parse_redis_url(settings.redis_url)
    triggers = {t["name"]: t["metadata"] for t in scaler["spec"]["triggers"]}
    assert triggers["ready"]["listName"] == keys.ready
    assert triggers["processing"]["listName"] == keys.processing
    assert int(triggers["processing"]["listLength"]) == settings.concurrency  # busy workers are kept
    assert {int(t["databaseIndex"]) for t in triggers.values()} == {target.db}
    # The TriggerAuthentication gives KEDA the same Redis as the workers' URL.
    (auth,) = {t["authenticationRef"]["name"] for t in scaler["spec"]["triggers"]}
    given = {
        ref["parameter"]: secret_example["stringData"][ref["key"]]
        for ref in _one(docs, "TriggerAuthentication", auth)["spec"]["secretTargetRef"]
    }
    assert given["addresses"].split(",") == [f"{host}:{port}" for host, port in target.nodes]
    assert given["sentinelMaster"] == target.master_name
    assert given["password"] == target.password


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
    job = _one(docs, "Job", "docllm-init-db")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert _docllm_argv(container) == ["init-db"]
    for name in ("docllm-worker", "docllm-reaper"):
        waits = _one(docs, "Deployment", name)["spec"]["template"]["spec"]["initContainers"]
        assert [_docllm_argv(c)[0] for c in waits] == ["stats"]  # stops at start while the schema is missing
        assert "until " in waits[0]["command"][2]
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
    (mount,) = pod["containers"][0]["volumeMounts"]
    assert mount["mountPath"] == _image_env()["DOCLLM_HOME"]


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
