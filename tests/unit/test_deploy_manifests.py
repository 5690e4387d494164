"""Deployment files stay valid: compose parses and wires every service; every Kubernetes manifest
validates offline against the Kubernetes schemas; the kustomization lists files that exist."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from libs.common.db.migrate import SERVICES
from services.telemetry.settings import TelemetrySettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30.0"


def _documents() -> list[tuple[str, dict[str, Any]]]:
    """Every manifest document by `file#index`; parsed YAML has no schema, hence `Any` values."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs += [(f"{path.name}#{i}", d) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d]
    return docs


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


def test_kustomization_lists_exactly_the_manifest_files() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


def test_each_service_has_deployment_with_probes_service_and_disruption_budget() -> None:
    kinds: dict[str, set[str]] = {}
    for _, doc in _documents():
        kinds.setdefault(doc["metadata"]["name"], set()).add(doc["kind"])
        if doc["kind"] == "Deployment":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert container["resources"]["requests"]
    for service in SERVICES:
        assert kinds[service] == {"Deployment", "Service", "PodDisruptionBudget"}
    assert kinds["node-agent"] == {"DaemonSet"}
    assert kinds["gpucloud-migrate"] == {"Job"}


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


def test_the_node_agent_is_given_only_variables_it_reads_and_names_itself_after_its_node() -> None:
    prefix = TelemetrySettings.model_config.get("env_prefix", "")
    read = {f.alias or prefix + name.upper() for name, f in TelemetrySettings.model_fields.items()}
    runtime = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}  # for the NVIDIA container runtime
    (agent,) = [d for _, d in _documents() if d["kind"] == "DaemonSet"]
    env = agent["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {e["name"] for e in env} - read - runtime == set()
    hostname = next(e for e in env if e["name"] == "TELEMETRY_AGENT_HOSTNAME")
    assert hostname["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_the_node_agents_init_container_can_hand_over_its_directory_at_every_start(tmp_path: Path) -> None:
    (agent,) = [d for _, d in _documents() if d["kind"] == "DaemonSet"]
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
