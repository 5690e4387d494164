"""Settings of the telemetry service (shared ones keep their names; its own take the TELEMETRY_ prefix)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["TelemetrySettings"]


class TelemetrySettings(BaseServiceSettings):
    """Settings of the telemetry aggregator and of the node agent (one class: one env prefix)."""

    model_config = SettingsConfigDict(
        env_prefix="TELEMETRY_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "telemetry"
    http_port: int = 8003
    # The node agent
    agent_mode: Literal["auto", "nvml", "simulated"] = Field(
        default="auto", description="auto: NVML if it initialises, else the simulated fleet."
    )
    fleet_file: Path | None = Field(default=None, description="Fleet YAML the simulated agent plays.")
    sample_interval_s: float = Field(default=1.0, gt=0, le=60, description="Agent sampling period.")
    sim_speed: float = Field(
        default=1.0,
        ge=1,
        le=100,
        description="Simulated fleet: GPU physics (memory, heat, leaks), start-up delays and migration "
        "steps run this many times faster than the wall clock; job run times are kept (tests use 5).",
    )
    agent_hostname: str | None = Field(default=None, description="NVML mode: node name (default: hostname).")
    agent_state_dir: Path | None = Field(
        default=None,
        description="Directory for the agent's checkpoint of its placements and consumer positions, so "
        "a restart resumes there instead of replaying the whole scheduler topic (unset: full replay).",
    )
    agent_runner: Literal["auto", "simulated", "process", "podman", "kubernetes"] = Field(
        default="auto",
        description="What runs placed workloads: the simulator (needs a simulated fleet), host processes "
        "under a supervisor each, podman containers, or auto (simulated with a simulated fleet, else podman "
        "where a CDI spec names the GPUs and podman runs a container, else process); kubernetes: one Pod per "
        "placement on this node (never chosen by auto).",
    )
    agent_kube_namespace: str = Field(
        default="gpucloud-workloads",
        min_length=1,
        description="Kubernetes runner: the namespace of the workloads' Pods.",
    )
    agent_kube_config: Path | None = Field(
        default=None,
        description="Kubernetes runner: a kubeconfig file (unset: the Pod's in-cluster service account).",
    )
    agent_podman: str = Field(
        default="podman",
        description="Podman runner: the podman command and its global options (split as a shell would), "
        "e.g. 'podman --root /srv/containers'.",
    )
    agent_podman_run_args: str = Field(
        default="",
        description="Podman runner: options added to every podman run (split as a shell would), e.g. "
        "'--runtime runc' or '--security-opt label=disable' (docs/executors.md).",
    )
    agent_workload_dir: Path | None = Field(
        default=None,
        description="Process runner: root of the per-workload state directories (unset: <AGENT_STATE_DIR>"
        "/workloads, or gpucloud-agent-workloads in the temporary directory without a state dir).",
    )
    agent_log_quota_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=4096,
        description="Process runner: stdout and stderr kept per workload (the older half is rotated out).",
    )
    agent_cgroup_root: Path | None = Field(
        default=None,
        description="Process runner: cgroup v2 group under which each workload gets its limited group "
        "(unset: the agent's own cgroup; it must hold no processes for the kernel to enable controllers).",
    )
    agent_output_cap_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Process runner: outputs/ bytes shipped to the object store per run; files beyond it "
        "are not uploaded and are listed as dropped in the outputs manifest.",
    )
    agent_log_chunk_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        le=64 << 20,
        description="Process runner: the most bytes of a workload's output in one log chunk object.",
    )
    agent_ship_give_up_s: float = Field(
        default=300.0,
        ge=0,
        description="Process runner: how long a run's exit report waits for its log and outputs to reach "
        "the object store before it is reported without them (and an error is logged).",
    )
    agent_restore_wait_s: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        description="Process runner: how long a migrated workload's target waits for the checkpoint of the "
        "placement it left before it starts from the start (and says so).",
    )
    agent_nvidia_smi: str = Field(
        default="nvidia-smi",
        description="Real GPUs: the nvidia-smi command device actions run (GPU reset, MIG layouts), "
        "split like a shell line.",
    )
    agent_reboot_command: str = Field(
        default="",
        description="Real GPUs: the command a node reboot runs, split like a shell line (e.g. "
        "'sudo systemctl reboot'); empty: node reboots are refused as not configured.",
    )
    agent_device_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="Real GPUs: how long one device command may run before it is killed and the action "
        "reported failed.",
    )
    # The aggregator
    rollup_interval_s: float = Field(default=60.0, ge=1, le=3600, description="Rollup window length.")
    rollup_grace_s: float = Field(default=5.0, ge=0, description="Wait for late samples before a rollup.")
    recent_samples: int = Field(default=300, ge=30, le=3600, description="Samples kept per allocated GPU.")
    stream_refresh_s: float = Field(default=1.0, gt=0, le=60, description="SSE refresh period.")
    allocation_refresh_s: float = Field(default=1.0, gt=0, description="Allocation label cache refresh.")
    thermal_fault_margin_c: float = Field(
        default=0.0, description="Thermal fault at (model slowdown temperature + margin)."
    )
    pcie_saturation_share: float = Field(default=0.9, gt=0, le=1, description="RX share of the link.")
    pcie_saturation_samples: int = Field(default=5, ge=1, description="Consecutive samples to call it.")
    sbe_burst: int = Field(default=10, ge=1, description="Single-bit ECC increase that is a fault.")
