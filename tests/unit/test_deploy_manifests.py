"""Deployment files stay valid: compose parses and wires every service; every Kubernetes manifest
validates offline against the Kubernetes schemas; each kustomization lists the files beside it; the base
and every overlay build with `kubectl kustomize`, their objects validate, and the node agent's RBAC is
the least its Kubernetes runner needs, in namespaces that agree; each overlay gives every container its own
Kafka topic prefix and its own database Secret. The observability part (dashboards, Grafana provisioning,
the Prometheus scrape config) builds on its own, scrapes every service where compose and the base put it,
and is what compose's `observability` profile mounts."""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from libs.common.bus.kafka import all_physical_topics
from libs.common.db.migrate import SERVICES
from services.telemetry.settings import TelemetrySettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = K8S / "overlays"
#: Parts applied on their own (`kubectl apply -k deploy/k8s/<part>`), not through the base.
STANDALONE = {"observability"}
GRAFANA = ROOT / "deploy" / "grafana"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DATASOURCE_UID = "gpucloud-prometheus"
KUBERNETES_VERSION = "1.30.0"
OVERLAY_NAMES = sorted(p.name for p in OVERLAYS.iterdir() if (p / "kustomization.yaml").is_file())
ENVIRONMENTS = ["base", *OVERLAY_NAMES]
# What the node agent's Kubernetes runner does with Pods: create, watch, read back, delete, read logs.
RUNNER_GRANTS = {("", "pods", v) for v in ("create", "delete", "get", "list", "watch")} | {
    ("", "pods/log", "get")
}


def _source_files() -> list[Path]:
    """The base's manifests (overlays hold partial patches, checked through their builds instead)."""
    return sorted(
        p
        for p in K8S.rglob("*.yaml")
        if p.name != "kustomization.yaml" and not p.is_symlink() and OVERLAYS not in p.parents
    )


def _documents() -> list[tuple[str, dict[str, Any]]]:
    """Every base manifest document by `file#index`; parsed YAML has no schema, hence `Any` values."""
    docs = []
    for path in _source_files():
        name = path.relative_to(K8S).as_posix()
        docs += [(f"{name}#{i}", d) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d]
    return docs


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return found


@functools.cache
def _built(environment: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize` outputs for the base, one overlay or one standalone part."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (`make kubectl` installs Debian's kubernetes-client)")
    path = (
        K8S
        if environment == "base"
        else K8S / environment
        if environment in STANDALONE
        else OVERLAYS / environment
    )
    done = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"kubectl kustomize {path}: {done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    """A Role's rules as (API group, resource, verb); a wildcard stays a literal `*` and matches nothing."""
    assert all("nonResourceURLs" not in r and "resourceNames" not in r for r in role["rules"]), role["rules"]
    return {
        (g, res, v)
        for r in role["rules"]
        for g in r["apiGroups"]
        for res in r["resources"]
        for v in r["verbs"]
    }


def _pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] in {"Deployment", "DaemonSet", "Job"}
    }


@pytest.mark.parametrize(("name", "doc"), _documents(), ids=[n for n, _ in _documents()])
def test_every_manifest_validates_against_the_kubernetes_schema(name: str, doc: dict[str, object]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_broken_manifest_is_caught() -> None:
    broken = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "two"},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    "kustomization", sorted(K8S.rglob("kustomization.yaml")), ids=lambda p: str(p.parent)
)
def test_each_kustomization_lists_exactly_the_files_and_parts_beside_it(kustomization: Path) -> None:
    spec = yaml.safe_load(kustomization.read_text())
    here = kustomization.parent
    listed = set(spec.get("resources", [])) | set(spec.get("patchesStrategicMerge", []))
    present = {p.name for p in here.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present
    parts = {p.name for p in here.iterdir() if (p / "kustomization.yaml").is_file()}
    if here == K8S:
        parts -= STANDALONE
    assert {b for b in spec.get("bases", []) if not b.startswith("..")} == parts


def test_each_service_has_deployment_with_probes_service_and_disruption_budget() -> None:
    kinds: dict[str, set[str]] = {}
    for _, doc in _documents():
        kinds.setdefault(doc["metadata"]["name"], set()).add(doc["kind"])
        if doc["kind"] == "Deployment":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert container["resources"]["requests"]
    for service in (*SERVICES, "gateway"):
        assert kinds[service] == {"Deployment", "Service", "PodDisruptionBudget"}
    assert kinds["node-agent"] == {"DaemonSet", "ServiceAccount", "Role", "RoleBinding"}
    assert kinds["gpucloud-migrate"] == {"Job"}


def test_the_node_agent_may_only_manage_pods_and_read_their_logs() -> None:
    docs = [d for _, d in _documents()]
    assert _grants(_one(docs, "Role", "node-agent")) == RUNNER_GRANTS


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ("a verb", {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}),
        ("exec", {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}),
        ("a wildcard", {"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}),
        ("secrets", {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_role_granting_more_than_the_runner_needs_is_caught(
    change: str, rule: dict[str, list[str]]
) -> None:
    role = copy.deepcopy(_one([d for _, d in _documents()], "Role", "node-agent"))
    role["rules"].append(rule)
    assert _grants(role) != RUNNER_GRANTS, change


def test_only_the_node_agent_mounts_a_service_account_token() -> None:
    docs = [d for _, d in _documents()]
    specs = _pod_specs(docs)
    agent = specs.pop("DaemonSet/node-agent")
    account = _one(docs, "ServiceAccount", agent["serviceAccountName"])
    assert agent["automountServiceAccountToken"] is True
    assert account["automountServiceAccountToken"] is False  # pods must ask for it, as the agent's do
    binding = _one(docs, "RoleBinding", "node-agent")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "node-agent",
    }
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [("ServiceAccount", "node-agent")]
    assert {name: spec.get("automountServiceAccountToken") for name, spec in specs.items()} == dict.fromkeys(
        specs, False
    )
    assert _one(docs, "ServiceAccount", "default")["automountServiceAccountToken"] is False  # workloads' Pods


def test_the_configmap_selects_the_kubernetes_runner_with_settings_the_agent_reads() -> None:
    data = _one([d for _, d in _documents()], "ConfigMap", "gpucloud-config")["data"]
    prefix = TelemetrySettings.model_config.get("env_prefix", "")
    given = {k.removeprefix(prefix).lower(): v for k, v in data.items() if k.startswith(prefix)}
    assert set(given) - set(TelemetrySettings.model_fields) == set()
    settings = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", **given)
    assert settings.agent_runner == "kubernetes"
    assert given["agent_kube_namespace"] == "gpucloud-workloads"
    assert "agent_kube_config" not in given  # in the cluster: the ServiceAccount's token


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_each_environment_builds_and_every_object_validates(environment: str) -> None:
    built = _built(environment)
    for doc in built:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)

    def named(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] != "Namespace"}

    assert named(built) == named([d for _, d in _documents()])


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_each_environment_puts_the_agent_and_its_pods_in_namespaces_that_agree(environment: str) -> None:
    built = _built(environment)
    namespaces = {d["metadata"]["name"]: d for d in built if d["kind"] == "Namespace"}
    control = _one(built, "DaemonSet")["metadata"]["namespace"]
    role = _one(built, "Role", "node-agent")
    workloads = role["metadata"]["namespace"]
    assert control != workloads
    assert set(namespaces) == {control, workloads}
    assert namespaces[workloads]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert _grants(role) == RUNNER_GRANTS
    binding = _one(built, "RoleBinding", "node-agent")
    assert binding["metadata"]["namespace"] == workloads
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "node-agent", "namespace": control}]
    assert _one(built, "ServiceAccount", "node-agent")["metadata"]["namespace"] == control
    config = _one(built, "ConfigMap", "gpucloud-config")
    assert config["data"]["TELEMETRY_AGENT_KUBE_NAMESPACE"] == workloads
    assert f"redis.{control}.svc" in config["data"]["REDIS_URL"]
    in_workloads = {
        (d["kind"], d["metadata"]["name"]) for d in built if d["metadata"].get("namespace") == workloads
    }
    assert in_workloads == {
        ("Role", "node-agent"),
        ("RoleBinding", "node-agent"),
        ("ServiceAccount", "default"),
    }
    others = {d["metadata"].get("namespace") for d in built if d["kind"] != "Namespace"} - {workloads}
    assert others == {control}


def test_environments_share_no_namespace() -> None:
    names = [d["metadata"]["name"] for e in ENVIRONMENTS for d in _built(e) if d["kind"] == "Namespace"]
    assert len(names) == len(set(names)) == 2 * len(ENVIRONMENTS)


def _containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every workload's (not init) containers by `Kind/name/container`."""
    return {f"{name}/{c['name']}": c for name, spec in _pod_specs(docs).items() for c in spec["containers"]}


def _environment_of(container: dict[str, Any], docs: list[dict[str, Any]]) -> dict[str, object]:
    """A container's variables as Kubernetes resolves them: `env` over `envFrom`, a ConfigMap's values
    inline, a Secret's as their `secretKeyRef` (or `secretRef` for a whole one)."""
    resolved: dict[str, object] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            resolved |= _one(docs, "ConfigMap", source["configMapRef"]["name"])["data"]
        else:
            resolved |= dict.fromkeys(_secret_keys(docs, source["secretRef"]["name"]), source)
    return resolved | {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _secret_keys(docs: list[dict[str, Any]], name: str) -> set[str]:
    found = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == name]
    return {k for d in found for k in (*d.get("stringData", {}), *d.get("data", {}))}


@functools.cache
def _topic_prefixes(environment: str) -> dict[str, object]:
    built = _built(environment)
    return {n: _environment_of(c, built).get("KAFKA_TOPIC_PREFIX") for n, c in _containers(built).items()}


@pytest.mark.parametrize("overlay", OVERLAY_NAMES)
def test_every_container_of_an_overlay_gets_the_overlays_own_topic_prefix(overlay: str) -> None:
    prefixes = _topic_prefixes(overlay)
    assert {"DaemonSet/node-agent/agent", *(f"Deployment/{s}/{s}" for s in SERVICES)} <= set(prefixes)
    assert set(prefixes.values()) == {f"{overlay}."}, prefixes


def test_overlays_sharing_a_broker_share_no_topic_or_consumer_group() -> None:
    default = TelemetrySettings.model_fields["kafka_topic_prefix"].default
    prefixes = {str(p or default) for e in ENVIRONMENTS for p in set(_topic_prefixes(e).values())}
    assert len(prefixes) == len(ENVIRONMENTS)
    topics = [t for p in prefixes for t in all_physical_topics(p)]
    assert len(topics) == len(set(topics))
    groups = [TelemetrySettings(kafka_topic_prefix=p).group_id("agent") for p in prefixes]
    assert len(groups) == len(set(groups))


@pytest.mark.parametrize("overlay", OVERLAY_NAMES)
def test_an_overlay_takes_the_database_url_from_its_own_secret_not_the_bases(overlay: str) -> None:
    built = _built(overlay)
    urls = {n: _environment_of(c, built).get("DATABASE_URL") for n, c in _containers(built).items()}
    agent = urls.pop("DaemonSet/node-agent/agent")
    assert agent is None  # the node agent opens no database
    assert urls.pop("Deployment/gateway/gateway") is None  # nor does the gateway (sessions live in Redis)
    own = {"secretKeyRef": {"name": "gpucloud-database", "key": "DATABASE_URL"}}
    assert urls == dict.fromkeys(urls, own)
    assert {"Job/gpucloud-migrate/migrate", *(f"Deployment/{s}/{s}" for s in SERVICES)} == set(urls)


def test_compose_runs_kafka_postgres_redis_and_every_service_with_healthchecks() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["kafka"]["image"].startswith("apache/kafka")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for name in ("kafka", "postgres", "redis", *SERVICES):
        assert "healthcheck" in services[name], name
    for name in SERVICES:
        assert services[name]["build"]["args"]["SERVICE"] == name
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["agent"]["command"][-1] == "agent"
    gateway = services["gateway"]
    assert gateway["build"]["args"]["SERVICE"] == "gateway"
    assert "healthcheck" in gateway
    assert {f"GATEWAY_{s.upper()}_URL" for s in SERVICES} <= set(gateway["environment"])


def test_the_node_agent_is_given_only_variables_it_reads_and_names_itself_after_its_node() -> None:
    prefix = TelemetrySettings.model_config.get("env_prefix", "")
    read = {f.alias or prefix + name.upper() for name, f in TelemetrySettings.model_fields.items()}
    runtime = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}  # for the NVIDIA container runtime
    agent = _one([d for _, d in _documents()], "DaemonSet")
    env = agent["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {e["name"] for e in env} - read - runtime == set()
    hostname = next(e for e in env if e["name"] == "TELEMETRY_AGENT_HOSTNAME")
    assert hostname["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_the_node_agents_init_container_can_hand_over_its_directory_at_every_start(tmp_path: Path) -> None:
    agent = _one([d for _, d in _documents()], "DaemonSet")
    (init,) = agent["spec"]["template"]["spec"]["initContainers"]
    (mount,) = init["volumeMounts"]
    caps = ",".join(f"+{c.lower()}" for c in init["securityContext"]["capabilities"]["add"])
    command = [arg.replace(mount["mountPath"], str(tmp_path)) for arg in init["command"]]
    for start in ("first", "second"):  # the second finds the directory already the agent's
        done = subprocess.run(
            ["setpriv", "--reuid=0", "--inh-caps=-all", f"--bounding-set=-all,{caps}", *command],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{start} start: {done.stderr}"
    assert (tmp_path.stat().st_uid, tmp_path.stat().st_mode & 0o777) == (10001, 0o700)


def _dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted((GRAFANA / "dashboards").glob("*.json"))}


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object under ``node``."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_observability_builds_alone_into_configmaps_of_every_dashboard_and_the_scrape_config() -> None:
    built = _built("observability")
    for doc in built:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    maps = {d["metadata"]["name"]: d for d in built}
    assert {d["kind"] for d in built} == {"ConfigMap"}
    assert {d["metadata"]["namespace"] for d in built} == {"gpucloud"}  # beside the base's services
    dashboards = maps["gpucloud-grafana-dashboards"]
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert {k: json.loads(v) for k, v in dashboards["data"].items()} == _dashboards()
    assert maps["gpucloud-grafana-datasources"]["metadata"]["labels"]["grafana_datasource"] == "1"
    assert maps["gpucloud-prometheus-config"]["data"]["prometheus.yml"] == PROMETHEUS_CONFIG.read_text()


def test_every_dashboard_reads_the_provisioned_datasource_and_a_current_schema() -> None:
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    [source] = datasources["datasources"]
    assert (source["uid"], source["type"], source["isDefault"]) == (DATASOURCE_UID, "prometheus", True)
    dashboards = _dashboards()
    assert set(dashboards) == {"gpu-fleet.json", "gpu.json", "control-plane.json", "costs.json"}
    assert len({d["uid"] for d in dashboards.values()}) == len(dashboards)
    for name, board in dashboards.items():
        assert board["schemaVersion"] >= 36, name
        sources = [o["datasource"] for o in _walk(board) if "datasource" in o]
        assert sources, name
        assert all(s == {"type": "prometheus", "uid": DATASOURCE_UID} for s in sources), name
        assert all(t["expr"] for p in board["panels"] for t in p["targets"]), name


def test_the_scrape_config_reaches_every_service_where_compose_and_the_base_put_it() -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    docs = [d for _, d in _documents()]
    for service in SERVICES:
        [target] = [t for c in jobs[service]["static_configs"] for t in c["targets"]]
        host, port = target.split(":")
        assert host == service
        assert f"{port}:{port}" in services[service]["ports"]
        assert [p["port"] for p in _one(docs, "Service", service)["spec"]["ports"]] == [int(port)]
        assert jobs[service].get("metrics_path", "/metrics") == "/metrics"
    gpus = jobs["gpus"]
    assert (gpus["metrics_path"], gpus["static_configs"]) == (
        "/metrics/gpus",
        jobs["telemetry"]["static_configs"],
    )
    assert gpus["authorization"]["type"] == "Bearer"  # libs/common/auth takes the key as a bearer token
    tenants = jobs["tenants"]  # the tenant-labelled metrics: admins only, where a service has them
    assert tenants["metrics_path"] == "/metrics/tenants"
    assert tenants["authorization"] == gpus["authorization"]
    own = [t for c in tenants["static_configs"] for t in c["targets"]]
    assert own == [
        t for s in ("scheduler", "billing") for c in jobs[s]["static_configs"] for t in c["targets"]
    ]
    assert set(jobs) == {*SERVICES, "gpus", "tenants"}


def test_promtool_accepts_the_scrape_config(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (`make promtools` installs Debian's prometheus)")
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    key = tmp_path / "admin_api_key"  # the file compose and Kubernetes mount: it must exist for promtool
    key.write_text("k" * 24)
    for job in config["scrape_configs"]:
        if "authorization" in job:
            job["authorization"]["credentials_file"] = str(key)
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_runs_prometheus_and_grafana_only_under_the_observability_profile() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    profiled = {name for name, s in services.items() if s.get("profiles")}
    assert profiled == {"prometheus", "grafana"}
    assert all(services[n]["profiles"] == ["observability"] for n in profiled)
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    [key_file] = {
        j["authorization"]["credentials_file"] for j in config["scrape_configs"] if "authorization" in j
    }
    assert [s["target"] for s in services["prometheus"]["secrets"]] == [key_file]
    assert (
        "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"
        in services["prometheus"]["volumes"]
    )
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "gpucloud.yaml").read_text())
    [path] = [p["options"]["path"] for p in provider["providers"]]
    assert set(services["grafana"]["volumes"]) == {
        "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro",
        f"./deploy/grafana/dashboards:{path}:ro",
    }
