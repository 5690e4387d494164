"""TELEMETRY_AGENT_RUNNER=podman and auto's choice of podman; what the podman runner refuses."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner.podman import PodmanRunner, has_nvidia_cdi, podman_runs_containers
from services.telemetry.service.agent.setup import host_runner, simulated_setup, with_runner
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CDI_SPEC = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: GPU-0\n"


def _settings(tmp_path: Path, runner: Any) -> TelemetrySettings:
    return TelemetrySettings(agent_runner=runner, agent_workload_dir=tmp_path / "runs")


async def test_podman_is_chosen_by_name_and_passes_no_devices_on_a_simulated_fleet(tmp_path: Path) -> None:
    setup = await simulated_setup(settings=_settings(tmp_path, "podman"), clock=lambda: T0)
    chosen = with_runner(setup, settings=_settings(tmp_path, "podman")).runner
    assert isinstance(chosen, PodmanRunner)
    assert chosen.runner_name == "podman"
    assert chosen.root.parent == tmp_path / "runs"
    assert not chosen.cdi  # a simulated fleet's GPU UUIDs name no device


def _cdi_dir(tmp_path: Path, text: str) -> Path:
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text(text)
    return tmp_path / "cdi"


def test_auto_takes_podman_where_a_cdi_spec_names_the_gpus_and_podman_runs_a_container(
    tmp_path: Path,
) -> None:
    asked: list[dict[str, Any]] = []

    def works(**kw: Any) -> str | None:
        asked.append(kw)
        return None

    settings = TelemetrySettings(agent_podman="podman --root /srv/c", agent_podman_run_args="--runtime runc")
    assert host_runner(settings=settings, cdi_dirs=[_cdi_dir(tmp_path, CDI_SPEC)], probe=works) == "podman"
    assert asked == [{"podman": ["podman", "--root", "/srv/c"], "run_args": ["--runtime", "runc"]}]


def test_auto_takes_the_process_runner_without_a_cdi_spec_or_a_working_podman(tmp_path: Path) -> None:
    def fails(**_: Any) -> str | None:
        return "podman could not run a container: crun: no"

    def unasked(**_: Any) -> str | None:
        raise AssertionError("podman is not tried without a CDI spec")

    settings = TelemetrySettings()
    assert host_runner(settings=settings, cdi_dirs=[tmp_path / "none"], probe=unasked) == "process"
    assert host_runner(settings=settings, cdi_dirs=[_cdi_dir(tmp_path, CDI_SPEC)], probe=fails) == "process"


def test_only_a_cdi_spec_for_nvidia_gpus_counts(tmp_path: Path) -> None:
    assert not has_nvidia_cdi([_cdi_dir(tmp_path, "kind: vendor.com/fpga\n"), tmp_path / "missing"])
    (tmp_path / "cdi" / "gpus.json").write_text('{"kind": "nvidia.com/gpu"}')
    assert has_nvidia_cdi([tmp_path / "cdi"])


def test_a_missing_podman_is_said_plainly() -> None:
    why = podman_runs_containers(podman=["/nonexistent/podman"], run_args=[])
    assert why == "/nonexistent/podman is not installed"


def test_the_settings_accept_podman_and_refuse_other_runners() -> None:
    assert TelemetrySettings(agent_runner="podman").agent_runner == "podman"
    with pytest.raises(ValueError, match="agent_runner"):
        TelemetrySettings(agent_runner="docker")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("run", "why"),
    [
        (None, "no run spec: nothing to execute (the podman runner runs an image)"),
        (RunSpec(command=["true"]), "the run spec has no image (the podman runner runs an image)"),
    ],
)
def test_a_placement_without_an_image_fails_at_once(tmp_path: Path, run: RunSpec | None, why: str) -> None:
    runner = PodmanRunner(root=tmp_path / "runs", card_memory={}, log_quota_bytes=1 << 20, environ={})
    runner.start(
        workload_id="w1",
        tenant_id="acme",
        placement_id="p1",
        gpu_uuids=["GPU-0"],
        allocations=[AllocationItem(gpu_uuid="GPU-0", units=Decimal(8), model="H100")],
        profile="training",
        duration_s=None,
        run=run,
        at=T0,
    )
    [report] = runner.poll(now=T0)
    assert (report.event, report.reason, report.runner) == ("failed", why, "podman")
