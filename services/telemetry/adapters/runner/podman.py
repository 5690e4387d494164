"""The podman runner: each placement is an OCI container, run by podman under the process runner's
supervisor model (podman_supervise.py), in the same run directories (docs/executors.md).

The container gets exactly its GPUs as CDI devices (``--device nvidia.com/gpu=<uuid>``, a MIG instance
by its ``MIG-`` UUID), so it cannot open the others' device nodes; the environment binding.py computes
(CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, GPUCLOUD_*); the run's outputs/, checkpoints/ and tmp/
bind-mounted at the same paths, so GPUCLOUD_OUTPUT_DIR and the others hold inside; the spec's memory and
CPU limits as ``--memory``/``--cpus`` (podman enforces them through its cgroups); labels naming the
workload, tenant and placement. What differs from the process runner is only what is run: the rest
(launch at the next poll, stop files, exit reasons, re-adoption, reports) is ProcessRunner's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from libs.common.events.scheduler import RunSpec
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.binding import BASE_ENV
from services.telemetry.adapters.runner.podman_supervise import CIDFILE
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.runs import Launch, Run

__all__ = [
    "CDI_KIND",
    "CLIENT_ENV",
    "ENV_FILE",
    "LABEL_PLACEMENT",
    "LABEL_TENANT",
    "LABEL_WORKLOAD",
    "PodmanRunner",
    "cdi_spec_dirs",
    "container_env",
    "container_name",
    "container_spec",
    "has_nvidia_cdi",
    "podman_runs_containers",
    "run_argv",
]

log = logging.getLogger(__name__)
CDI_KIND = "nvidia.com/gpu"  # the device kind nvidia-ctk's CDI spec names GPUs and MIG instances under
LABEL_WORKLOAD, LABEL_TENANT, LABEL_PLACEMENT = "gpucloud.workload", "gpucloud.tenant", "gpucloud.placement"
ENV_FILE = "container.env"  # the container's environment, for --env-file (kept off podman's argv)
#: What the podman client itself may need of the agent's environment (rootless storage, configuration).
CLIENT_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_REGISTRIES_CONF",
)
NO_GPUS_NOTE = "simulated fleet: no GPU devices passed to the container (CUDA_VISIBLE_DEVICES names them)"
_MOUNTED = (files.OUTPUT_DIR, files.CHECKPOINT_DIR, "tmp")
_PROBE_TIMEOUT_S = 30.0


def container_name(run_dir_name: str) -> str:
    """One container per run directory, named after it."""
    return f"gpucloud-{run_dir_name}"


def container_env(env: Mapping[str, str], *, run_env: Mapping[str, str]) -> dict[str, str]:
    """The container's environment: binding.py's, less the host's PATH, locale, TZ and HOME (the
    image's own hold) unless the spec's env sets them."""
    host_only = {*BASE_ENV, "HOME"} - set(run_env)
    return {k: v for k, v in env.items() if k not in host_only}


def run_argv(
    *,
    podman: Sequence[str],
    run_args: Sequence[str],
    name: str,
    run: RunSpec,
    run_dir: Path,
    env_file: Path,
    inherit: Sequence[str],
    devices: Sequence[str],
    labels: Mapping[str, str],
    restore_dir: Path | None = None,
) -> list[str]:
    """The ``podman run`` command line of one placement: attached, named, labelled, limited.

    Kubernetes' split: ``command`` replaces the image's entrypoint, ``args`` its CMD; without a command
    the image's entrypoint runs with ``args`` (or its CMD). ``inherit`` names variables passed by name
    from podman's own environment (values an env file cannot hold: those with a newline).
    ``restore_dir`` (a migration's checkpoint, GPUCLOUD_RESTORE_FROM) is mounted read-only.
    """
    argv = [*podman, "run", "--name", name, "--replace", "--cidfile", str(run_dir / CIDFILE)]
    argv += ["--log-driver", "none", "--env-file", str(env_file)]
    for key in inherit:
        argv += ["--env", key]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    for device in devices:
        argv += ["--device", f"{CDI_KIND}={device}"]
    for sub in _MOUNTED:
        argv += ["--mount", f"type=bind,source={run_dir / sub},destination={run_dir / sub}"]
    if restore_dir is not None:
        argv += ["--mount", f"type=bind,source={restore_dir},destination={restore_dir},ro"]
    if run.memory_bytes is not None:
        argv += ["--memory", str(run.memory_bytes), "--memory-swap", str(run.memory_bytes)]
    if run.cpu_millis is not None:
        argv += ["--cpus", f"{run.cpu_millis / 1000:g}"]
    if run.working_dir:
        argv += ["--workdir", run.working_dir]
    if run.command:
        argv += ["--entrypoint", json.dumps(run.command)]
    return [*argv, *run_args, str(run.image), *run.args]


def _limits(run: RunSpec) -> str:
    said = []
    if run.memory_bytes is not None:
        said.append(f"--memory {run.memory_bytes}")
    if run.cpu_millis is not None:
        said.append(f"--cpus {run.cpu_millis / 1000:g}")
    if not said:
        return "no CPU or memory limit asked"
    return f"podman {', '.join(said)} (enforced by podman's cgroups)"


class PodmanRunner(ProcessRunner):
    """Runs workloads as podman containers, one supervisor each, under ``root``.

    ``podman`` is the podman command with its global options; ``run_args`` go to every ``podman run``
    (a host's needs: ``--runtime runc``, ``--security-opt label=disable``, ...). ``cdi`` passes the GPUs
    as CDI devices; off on a simulated fleet, whose GPU UUIDs name no device.
    """

    runner_name = "podman"
    supervisor_module = "services.telemetry.adapters.runner.podman_supervise"

    def __init__(
        self,
        *,
        podman: Sequence[str] = ("podman",),
        run_args: Sequence[str] = (),
        cdi: bool = True,
        **process: Any,  # ProcessRunner's: root, card_memory, log_quota_bytes, environ, ...
    ) -> None:
        self._podman = tuple(podman)
        self._run_args = tuple(run_args)
        self._cdi = cdi
        super().__init__(**process)

    @property
    def cdi(self) -> bool:
        """Whether the GPUs are passed to containers as CDI devices."""
        return self._cdi

    def _refusal(self, run: RunSpec | None) -> str | None:
        if run is None:
            return "no run spec: nothing to execute (the podman runner runs an image)"
        if not run.image:
            return "the run spec has no image (the podman runner runs an image)"
        if run.checkpoint is not None and run.checkpoint.command:
            # It would run on the host, outside the tenant's container.
            return "podman runner: checkpoint.command is not supported; use checkpoint.signal"
        return None

    def _spec(
        self, doc: dict[str, Any], *, launch: Launch, path: Path, devices: tuple[str, ...]
    ) -> dict[str, Any]:
        spec, env_file = container_spec(
            doc,
            launch=launch,
            path=path,
            devices=devices,
            podman=self._podman,
            run_args=self._run_args,
            cdi=self._cdi,
            environ=self._environ,
        )
        if env_file is not None:
            _write_env_file(path / ENV_FILE, env_file)
        return spec

    def _started_doc(self, run: Run) -> dict[str, Any] | None:
        """started.json with the container's id, once podman made the container (told only then)."""
        started = files.read_json(run.path / files.STARTED)
        if started is None:
            return None
        with contextlib.suppress(OSError):
            cid = (run.path / CIDFILE).read_text().strip()
            if cid:
                return started | {"container_id": cid}
        return None

    def _orphaned(self, run: Run, why: str) -> dict[str, Any]:
        """As the process runner's, and the container goes too (conmon keeps it past its client)."""
        spec = files.read_json(run.path / files.SPEC) or {}
        box = spec.get("container")
        if isinstance(box, dict) and box.get("name"):
            podman = [str(a) for a in box.get("podman") or self._podman]
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(  # noqa: S603 - podman, by the agent's configured command
                    [*podman, "rm", "--force", "--ignore", "--time", "0", str(box["name"])],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=_PROBE_TIMEOUT_S,
                    check=False,
                )
        return super()._orphaned(run, why)


def container_spec(
    doc: dict[str, Any],
    *,
    launch: Launch,
    path: Path,
    devices: Sequence[str],
    podman: Sequence[str],
    run_args: Sequence[str],
    cdi: bool,
    environ: Mapping[str, str],
) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The process runner's spec.json made a container's: the ``podman run`` argv, podman's own
    environment, the container's name and limits; and the env file's variables (None: no image)."""
    run = launch.run
    if run is None or not run.image:
        return doc | {"runner": "podman"}, None
    env = container_env(doc["env"], run_env=run.env)
    inherit = sorted(k for k, v in env.items() if "\n" in v)
    name = container_name(path.name)
    argv = run_argv(
        podman=podman,
        run_args=run_args,
        name=name,
        run=run,
        run_dir=path,
        env_file=path / ENV_FILE,
        inherit=inherit,
        devices=devices if cdi else (),
        restore_dir=launch.restore_dir,
        labels={
            LABEL_WORKLOAD: launch.workload_id,
            LABEL_TENANT: launch.tenant_id,
            LABEL_PLACEMENT: launch.placement_id,
        },
    )
    client = {k: environ[k] for k in CLIENT_ENV if k in environ} | {k: env[k] for k in inherit}
    notes = [*doc["notes"], *([] if cdi or not devices else [NO_GPUS_NOTE])]
    box = {"podman": list(podman), "name": name, "image": run.image, "limits": _limits(run)}
    spec = doc | {
        "runner": "podman",
        "argv": argv,
        "env": client,
        "cwd": None,
        "container": box,
        "notes": notes,
    }
    return spec, {k: v for k, v in env.items() if k not in inherit}


def _write_env_file(path: Path, env: Mapping[str, str]) -> None:
    """KEY=VALUE lines, readable by the agent's user only (the spec's env may hold secrets)."""
    path.unlink(missing_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
        out.writelines(f"{k}={v}\n" for k, v in env.items())


def cdi_spec_dirs() -> tuple[Path, ...]:
    """Where CDI specs are read from (the CDI default, as podman reads them)."""
    return (Path("/etc/cdi"), Path("/var/run/cdi"))


def has_nvidia_cdi(dirs: Sequence[Path]) -> bool:
    """A CDI spec for nvidia.com/gpu devices is there (``nvidia-ctk cdi generate`` writes one)."""
    for directory in dirs:
        with contextlib.suppress(OSError):
            for spec in sorted(directory.iterdir()):
                if spec.suffix in (".yaml", ".yml", ".json") and CDI_KIND in spec.read_text(errors="replace"):
                    return True
    return False


def podman_runs_containers(*, podman: Sequence[str], run_args: Sequence[str]) -> str | None:
    """None when podman is installed and runs a container here (the host's root filesystem, as an
    overlay, running ``true``: no image needed); else why not."""
    if not podman or shutil.which(podman[0]) is None:
        return f"{podman[0] if podman else 'podman'} is not installed"
    argv = [*podman, "run", "--rm", "--network", "none", "--log-driver", "none", *run_args, "--rootfs"]
    try:
        done = subprocess.run(  # noqa: S603 - podman, by the agent's configured command
            [*argv, "/:O", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"podman could not run a container: {exc}"
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return f"podman could not run a container: {lines[-1] if lines else f'exit {done.returncode}'}"
    return None
