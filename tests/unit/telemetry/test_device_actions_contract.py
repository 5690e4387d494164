"""DeviceActions: the same cases against the fake and against nvidia-smi's adapter driving a stand-in
nvidia-smi (a python script that records its argv and prints nvidia-smi's own formats)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest

from services.telemetry.adapters.devices import FakeDeviceActions, NvidiaSmiActions, SimDeviceActions
from services.telemetry.adapters.devices import nvidia_smi as nvidia_smi_module
from services.telemetry.adapters.devices.nvidia_smi import parse_gpu_instances, parse_profiles
from services.telemetry.adapters.fleetfile import parse_fleet
from services.telemetry.adapters.sim import SimFleet
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.domain.devices import DeviceResult
from services.telemetry.service.agent.ports import DeviceActions

GPU = "GPU-5c6a8a1e-8d3f-4a9b-b1c2-3d4e5f607182"
LGIP = """\
+-----------------------------------------------------------------------------+
| GPU instance profiles:                                                      |
| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
|                              Free/Total   GiB              CE    JPEG  OFA  |
|=============================================================================|
|   0  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |
|                                                             1     1     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 1g.10gb+me    20     1/1        9.75       No     16     1     0   |
|                                                             1     1     1   |
+-----------------------------------------------------------------------------+
|   0  MIG 1g.20gb       15     4/4        19.62      No     26     1     0   |
|                                                             1     1     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 2g.20gb       14     3/3        19.62      No     32     2     0   |
|                                                             2     2     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 3g.40gb        9     2/2        39.50      No     60     3     0   |
|                                                             3     3     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 4g.40gb        5     1/1        39.50      No     64     4     0   |
|                                                             4     4     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 7g.80gb        0     1/1        79.25      No     132    7     0   |
|                                                             8     7     1   |
+-----------------------------------------------------------------------------+
"""
LGI = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.40gb          9        2          4:4     |
+-------------------------------------------------------+
|   0  MIG 1g.10gb         19        9          2:1     |
+-------------------------------------------------------+
"""
CGI = (
    "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.40gb (ID  9)\n"
    "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile MIG 3g.40gb "
    "(ID  2)\n"
)
STAND_IN = """\
import json, sys
from pathlib import Path
here = Path(__file__).parent
with open(here / "argv.jsonl", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
answers = json.loads((here / "answers.json").read_text())
for flag in ("--gpu-reset", "-lgip", "-lgi", "-dci", "-dgi", "-cgi"):
    if flag in sys.argv:
        out, code = answers[flag]
        print(out, end="")
        sys.exit(code)
sys.exit(9)
"""
RESET_FAILED = "Unable to reset GPU 00000000:18:00.0 because it's being used by some other process.\n"
NOT_FOUND = "No GPU instances found: Not Found\n"


class Backend(Protocol):
    actions: DeviceActions

    def fails(self, action: str, *, exit_code: int, output: str) -> None:
        """The next `action` (reset_gpu, apply_mig) fails with this exit status and output."""

    def acted(self) -> list[str]:
        """The actions that changed something, in order (listings left out)."""


class FakeBackend:
    def __init__(self) -> None:
        self.fake = FakeDeviceActions(profiles={GPU: parse_profiles(LGIP)}, reboot_configured=False)
        self.actions: DeviceActions = self.fake

    def fails(self, action: str, *, exit_code: int, output: str) -> None:
        self.fake.fail[action] = DeviceResult(
            outcome="failed", reason=output.strip(), exit_code=exit_code, output=output
        )

    def acted(self) -> list[str]:
        return [name for name, _ in self.fake.carried_out]


class SmiBackend:
    def __init__(self, tmp_path: Path) -> None:
        self._dir = tmp_path
        (tmp_path / "nvidia-smi.py").write_text(STAND_IN)
        self._answers: dict[str, tuple[str, int]] = {
            "--gpu-reset": ("GPU 00000000:18:00.0 was successfully reset.\nAll done.\n", 0),
            "-lgip": (LGIP, 0),
            "-lgi": (LGI, 0),
            "-dci": (NOT_FOUND, 6),
            "-dgi": (NOT_FOUND, 6),
            "-cgi": (CGI, 0),
        }
        self._write()
        self.actions: DeviceActions = NvidiaSmiActions(
            nvidia_smi=(sys.executable, str(tmp_path / "nvidia-smi.py")), timeout_s=20
        )

    def _write(self) -> None:
        (self._dir / "answers.json").write_text(json.dumps(self._answers))

    def fails(self, action: str, *, exit_code: int, output: str) -> None:
        flag = {"reset_gpu": "--gpu-reset", "apply_mig": "-cgi"}[action]
        self._answers[flag] = (output, exit_code)
        self._write()

    def argv(self) -> list[list[str]]:
        log = self._dir / "argv.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def acted(self) -> list[str]:
        names = {"--gpu-reset": "reset_gpu", "-cgi": "apply_mig"}
        return [names[a] for argv in self.argv() for a in argv if a in names]


@pytest.fixture(params=["fake", "nvidia-smi"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return FakeBackend() if request.param == "fake" else SmiBackend(tmp_path)


async def test_a_reset_that_works_succeeds(backend: Backend) -> None:
    result = await backend.actions.reset_gpu(gpu_uuid=GPU)

    assert (result.outcome, result.reason) == ("succeeded", "")
    assert backend.acted() == ["reset_gpu"]


async def test_a_reset_that_fails_reports_its_exit_status_and_output(backend: Backend) -> None:
    backend.fails("reset_gpu", exit_code=255, output=RESET_FAILED)

    result = await backend.actions.reset_gpu(gpu_uuid=GPU)

    assert (result.outcome, result.exit_code) == ("failed", 255)
    assert "being used by some other process" in result.output
    assert "being used by some other process" in result.reason


async def test_the_listing_gives_every_profile_with_its_id_and_room(backend: Backend) -> None:
    listing = await backend.actions.mig_profiles(gpu_uuid=GPU)

    assert listing.result.ok
    got = {p.name: (p.profile_id, p.free, p.total) for p in listing.profiles}
    assert got["1g.10gb"] == (19, 7, 7)
    assert got["3g.40gb"] == (9, 2, 2)
    assert got["7g.80gb"] == (0, 1, 1)
    assert len(got) == 7


async def test_a_valid_layout_is_applied(backend: Backend) -> None:
    result = await backend.actions.apply_mig(gpu_uuid=GPU, profiles=["3g.40gb", "1g.10gb"])

    assert result.outcome == "succeeded"
    assert backend.acted() == ["apply_mig"]


@pytest.mark.parametrize(
    ("profiles", "reason"),
    [
        (["5g.50gb"], "unknown MIG profile(s) 5g.50gb"),
        (["3g.40gb", "3g.40gb", "3g.40gb"], "3 instances of 3g.40gb asked, the GPU has room for 2"),
        (["4g.40gb", "2g.20gb", "2g.20gb"], "the layout needs 8 compute slices, the GPU has 7"),
        (["3g.40gb", "3g.40gb", "1g.10gb"], "the layout needs 9 memory slices, the GPU has 8"),
        (
            ["1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb", "2g.20gb"],
            "the layout needs 10 memory slices, the GPU has 8",
        ),
    ],
)
async def test_an_invalid_layout_is_refused_before_anything_is_destroyed(
    backend: Backend, profiles: list[str], reason: str
) -> None:
    result = await backend.actions.apply_mig(gpu_uuid=GPU, profiles=profiles)

    assert (result.outcome, result.commands) == ("refused", ())
    assert reason in result.reason
    assert backend.acted() == []


async def test_a_layout_the_driver_cannot_create_fails_with_its_output(backend: Backend) -> None:
    backend.fails(
        "apply_mig", exit_code=2, output="Unable to create a GPU instance: Insufficient Resources\n"
    )

    result = await backend.actions.apply_mig(gpu_uuid=GPU, profiles=["3g.40gb"])

    assert (result.outcome, result.exit_code) == ("failed", 2)
    assert "Insufficient Resources" in result.output


async def test_a_node_reboot_without_a_configured_command_is_refused(backend: Backend) -> None:
    result = await backend.actions.reboot_node(node="gpu-a-01")

    assert result.outcome == "refused"
    assert "not configured" in result.reason


async def test_nvidia_smi_runs_dci_dgi_then_cgi_with_the_listed_profile_ids(tmp_path: Path) -> None:
    smi = SmiBackend(tmp_path)

    result = await smi.actions.apply_mig(gpu_uuid=GPU, profiles=["3g.40gb", "1g.10gb"])

    assert [argv[1:] for argv in smi.argv()] == [
        ["-lgip", "-i", GPU],
        ["-i", GPU, "-dci"],
        ["-i", GPU, "-dgi"],
        ["-i", GPU, "-cgi", "9,19", "-C"],
    ]
    assert [argv[-1] for argv in result.commands] == ["-dci", "-dgi", "-C"]
    assert "Successfully created GPU instance ID  2" in result.output


async def test_nvidia_smi_reads_the_gpu_instances_with_their_slots(tmp_path: Path) -> None:
    listing = await SmiBackend(tmp_path).actions.mig_instances(gpu_uuid=GPU)

    assert [(i.profile, i.gpu_instance_id, i.slot) for i in listing.instances] == [
        ("3g.40gb", 2, 4),
        ("1g.10gb", 9, 2),
    ]
    assert parse_gpu_instances(LGIP) == ()


async def test_nvidia_smi_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text("import time\ntime.sleep(30)\n")
    actions = NvidiaSmiActions(nvidia_smi=(sys.executable, str(script)), timeout_s=0.5)

    result = await actions.reset_gpu(gpu_uuid=GPU)

    assert (result.outcome, result.exit_code) == ("failed", None)
    assert "did not finish within 0.5s" in result.reason


async def test_a_missing_nvidia_smi_fails_saying_it_cannot_start(tmp_path: Path) -> None:
    actions = NvidiaSmiActions(nvidia_smi=(str(tmp_path / "no-such-nvidia-smi"),))

    result = await actions.reset_gpu(gpu_uuid=GPU)

    assert result.outcome == "failed"
    assert "cannot start" in result.reason


async def test_a_configured_reboot_command_runs(tmp_path: Path) -> None:
    mark = tmp_path / "rebooted"
    command = (sys.executable, "-c", f"open({str(mark)!r}, 'w').write('yes')")
    actions = NvidiaSmiActions(reboot_command=command)

    result = await actions.reboot_node(node="gpu-a-01")

    assert (result.outcome, result.commands) == ("succeeded", (command,))
    assert mark.read_text() == "yes"


# -- layouts: the fake, nvidia-smi's adapter and the simulator create the same instances, largest first


class Layouts(Protocol):
    actions: DeviceActions
    gpu: str

    def created(self) -> list[str]:
        """The profiles of the GPU instances the last layout applied created, in creation order."""


class FakeLayouts:
    def __init__(self) -> None:
        self._fake = FakeBackend().fake
        self.actions: DeviceActions = self._fake
        self.gpu = GPU

    def created(self) -> list[str]:
        return [i.profile for i in self._fake.instances.get(GPU, ())]


class SmiLayouts:
    def __init__(self, tmp_path: Path) -> None:
        self._smi = SmiBackend(tmp_path)
        self.actions = self._smi.actions
        self.gpu = GPU

    def created(self) -> list[str]:
        names = {str(p.profile_id): p.name for p in parse_profiles(LGIP)}
        cgi = [argv[argv.index("-cgi") + 1] for argv in self._smi.argv() if "-cgi" in argv]
        return [names[i] for i in cgi[-1].split(",")] if cgi else []


class SimLayouts:
    def __init__(self) -> None:
        fleet = "nodes: [{hostname: gpu-a-01, gpus: [{model: H100-80GB-SXM, count: 1}]}]"
        self._fleet = SimFleet(spec=parse_fleet(fleet), start=datetime(2026, 1, 1, tzinfo=UTC))
        self.actions: DeviceActions = SimDeviceActions(fleet=self._fleet)
        self.gpu = gpu_uuid(hostname="gpu-a-01", index=0)

    def created(self) -> list[str]:
        return [m.profile for m in self._fleet.gpu(self.gpu).mig or ()]


@pytest.fixture(params=["fake", "nvidia-smi", "sim"])
def layouts(request: pytest.FixtureRequest, tmp_path: Path) -> Layouts:
    if request.param == "fake":
        return FakeLayouts()
    return SmiLayouts(tmp_path) if request.param == "nvidia-smi" else SimLayouts()


async def test_a_layout_is_created_largest_first(layouts: Layouts) -> None:
    result = await layouts.actions.apply_mig(gpu_uuid=layouts.gpu, profiles=["1g.10gb", "2g.20gb", "4g.40gb"])

    assert result.outcome == "succeeded"
    assert layouts.created() == ["4g.40gb", "2g.20gb", "1g.10gb"]


async def test_a_layout_over_the_gpus_memory_slices_is_refused_before_anything_changes(
    layouts: Layouts,
) -> None:
    result = await layouts.actions.apply_mig(gpu_uuid=layouts.gpu, profiles=["3g.40gb", "3g.40gb", "1g.10gb"])

    assert (result.outcome, result.commands) == ("refused", ())
    assert result.reason == "the layout needs 9 memory slices, the GPU has 8"
    assert layouts.created() == []


# -- nvidia-smi's commands: what counts as nothing to destroy, stdin, a command that will not die


async def test_a_destroy_that_fails_for_another_reason_than_nothing_found_stops_the_layout(
    tmp_path: Path,
) -> None:
    smi = SmiBackend(tmp_path)
    smi._answers["-dci"] = ("Unable to destroy compute instances: GPU not found\n", 6)
    smi._write()

    result = await smi.actions.apply_mig(gpu_uuid=GPU, profiles=["7g.80gb"])

    assert (result.outcome, result.exit_code) == ("failed", 6)
    assert [argv[-1] for argv in result.commands] == ["-dci"]
    assert smi.acted() == []


async def test_a_listing_that_fails_for_another_reason_than_no_instances_is_a_failure(tmp_path: Path) -> None:
    smi = SmiBackend(tmp_path)
    smi._answers["-lgi"] = ("Failed to display GPU instances: Insufficient Permissions, not found\n", 4)
    smi._write()

    listing = await smi.actions.mig_instances(gpu_uuid=GPU)

    assert (listing.result.outcome, listing.result.exit_code) == ("failed", 4)


class _StuckProcess:
    """A process that neither finishes nor dies when killed (stuck in the driver)."""

    returncode: int | None = None

    def __init__(self) -> None:
        self.killed = False

    async def communicate(self) -> tuple[bytes, bytes]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def kill(self) -> None:
        self.killed = True

    async def wait(self) -> int:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_command_that_outlives_its_kill_is_given_up_on_within_the_kill_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stuck = _StuckProcess()

    async def start(*argv: str, **kwargs: Any) -> _StuckProcess:
        return stuck

    monkeypatch.setattr(asyncio, "create_subprocess_exec", start)
    monkeypatch.setattr(nvidia_smi_module, "KILL_WAIT_S", 0.2)
    actions = NvidiaSmiActions(timeout_s=0.1)

    result = await asyncio.wait_for(actions.reset_gpu(gpu_uuid=GPU), timeout=5.0)

    assert stuck.killed
    assert (result.outcome, result.exit_code) == ("failed", None)
    assert "did not finish within 0.1s and was still there 0.2s after it was killed" in result.reason


class _DoneProcess:
    returncode = 0

    async def communicate(self) -> tuple[bytes, bytes]:
        return b"done\n", b""


async def test_commands_run_with_stdin_closed_so_none_can_wait_on_the_agents_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[dict[str, Any]] = []

    async def start(*argv: str, **kwargs: Any) -> _DoneProcess:
        started.append(kwargs)
        return _DoneProcess()

    monkeypatch.setattr(asyncio, "create_subprocess_exec", start)

    result = await NvidiaSmiActions().reset_gpu(gpu_uuid=GPU)

    assert (result.outcome, result.output) == ("succeeded", "done\n")
    assert [kwargs.get("stdin") for kwargs in started] == [asyncio.subprocess.DEVNULL]
