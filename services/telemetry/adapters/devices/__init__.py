"""Device actions on the host (services/telemetry/service/agent/ports.py DeviceActions): nvidia-smi on
real GPUs, the simulated fleet, and a scripted fake for tests."""

from services.telemetry.adapters.devices.fake import FakeDeviceActions
from services.telemetry.adapters.devices.nvidia_smi import NvidiaSmiActions
from services.telemetry.adapters.devices.sim import SimDeviceActions

__all__ = ["FakeDeviceActions", "NvidiaSmiActions", "SimDeviceActions"]
