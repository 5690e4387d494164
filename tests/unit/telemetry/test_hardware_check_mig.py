"""The hardware check's MIG step: the profiles listed; one instance created and destroyed only where MIG
mode is already on and the GPU has no instance (over the fake device adapter)."""

from __future__ import annotations

from scripts.hardware_check import mig_check
from services.telemetry.adapters.devices import FakeDeviceActions
from services.telemetry.adapters.devices.sim import sim_profiles
from services.telemetry.domain.devices import MigInstance
from services.telemetry.domain.gpu_models import GPU_MODELS

GPU = "GPU-hw"


async def test_with_mig_on_and_no_instance_the_smallest_profile_is_created_then_destroyed() -> None:
    fake = FakeDeviceActions(profiles={GPU: sim_profiles(GPU_MODELS["H100"])})
    lines: list[str] = []

    ok = await mig_check(gpu_uuid=GPU, mig_mode="Enabled", say=lines.append, actions=fake)

    assert ok
    assert [(a, p) for a, _, p in fake.calls if a == "apply_mig"] == [
        ("apply_mig", ("1g.10gb",)),
        ("apply_mig", ()),
    ]
    assert "profile 7g.80gb: id 0, 1/1 free, 80 GiB" in lines
    assert "instances now: [('1g.10gb', 1, None)]" in lines


async def test_with_mig_off_only_the_profiles_are_listed() -> None:
    fake = FakeDeviceActions(profiles={GPU: sim_profiles(GPU_MODELS["H100"])})
    lines: list[str] = []

    ok = await mig_check(gpu_uuid=GPU, mig_mode="Disabled", say=lines.append, actions=fake)

    assert ok
    assert fake.carried_out == []
    assert "MIG mode is not on: no instance created (the check never toggles it)" in lines


async def test_a_gpu_that_has_instances_is_left_as_it_is() -> None:
    have: dict[str, tuple[MigInstance, ...]] = {GPU: (MigInstance("3g.40gb", 2),)}
    fake = FakeDeviceActions(profiles={GPU: sim_profiles(GPU_MODELS["H100"])}, instances=have)
    lines: list[str] = []

    ok = await mig_check(gpu_uuid=GPU, mig_mode="Enabled", say=lines.append, actions=fake)

    assert ok
    assert fake.carried_out == []


async def test_a_gpu_without_mig_says_so_and_is_no_failure() -> None:
    lines: list[str] = []

    ok = await mig_check(gpu_uuid=GPU, mig_mode="[N/A]", say=lines.append, actions=FakeDeviceActions())

    assert ok
    assert "no MIG profiles listed (MIG mode is not on)" in lines
