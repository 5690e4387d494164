"""What a workload runs on its host: argv, environment, working directory, host limits, and their bounds.

Every placed event carries the run, so its size is bounded as tags are: per item, per count and in all
(``MAX_RUN_CHARS``), well under the broker's 1 MiB. The runner sets the GPU binding variables itself, so
a tenant may not (``RESERVED_ENV``, ``RESERVED_ENV_PREFIX``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CHECKPOINT_SIGNALS",
    "DEFAULT_CHECKPOINT_TIMEOUT_S",
    "DEFAULT_GRACE_S",
    "ENV_NAME_PATTERN",
    "MAX_ARGV",
    "MAX_ARG_CHARS",
    "MAX_CHECKPOINT_ARGV",
    "MAX_CHECKPOINT_TIMEOUT_S",
    "MAX_CPU_MILLIS",
    "MAX_ENV",
    "MAX_ENV_NAME_CHARS",
    "MAX_GRACE_S",
    "MAX_MEMORY_BYTES",
    "MAX_PATH_CHARS",
    "MAX_RUN_CHARS",
    "MIN_CPU_MILLIS",
    "MIN_MEMORY_BYTES",
    "RESERVED_ENV",
    "RESERVED_ENV_PREFIX",
    "Argv",
    "CheckpointRequest",
    "CpuMillis",
    "Env",
    "GraceSeconds",
    "MemoryBytes",
    "RunRequest",
    "WorkingDir",
    "run_size_problem",
]

MAX_ARGV = 256
MAX_ARG_CHARS = 4096
MAX_ENV = 128
MAX_ENV_NAME_CHARS = 256
MAX_PATH_CHARS = 4096
#: command, args and env (names and values) together, in characters.
MAX_RUN_CHARS = 128 * 1024
MIN_CPU_MILLIS, MAX_CPU_MILLIS = 10, 1024 * 1000
MIN_MEMORY_BYTES, MAX_MEMORY_BYTES = 4 * 1024**2, 16 * 1024**4
MAX_GRACE_S = 3600.0
DEFAULT_GRACE_S = 30.0
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: Set by the runner from the placement: the GPUs a workload sees and how MPS shares them.
RESERVED_ENV = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    }
)
RESERVED_ENV_PREFIX = "GPUCLOUD_"
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
#: Tab, newline and carriage return are the control characters an argument or a value may hold.
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def _no_controls(text: str) -> str:
    if any((ord(c) < 32 or 127 <= ord(c) < 160) and c not in _ALLOWED_CONTROLS for c in text):
        raise ValueError("must not hold NUL or control characters other than tab, newline and return")
    return text


def _env_name(name: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"an environment variable name matches {ENV_NAME_PATTERN}")
    if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIX):
        raise ValueError(f"{name} is set by the platform from the placement and may not be given")
    return name


def _absolute(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError("must be an absolute path (starting with '/')")
    if not path.isprintable():
        raise ValueError("must not hold control or other non-printable characters")
    return path


Arg = Annotated[str, Field(max_length=MAX_ARG_CHARS), AfterValidator(_no_controls)]
Argv = Annotated[
    list[Arg],
    Field(
        max_length=MAX_ARGV,
        description=f"At most {MAX_ARGV} items of up to {MAX_ARG_CHARS} characters (command and args "
        "together); no control characters but tab, newline and return.",
    ),
]
EnvName = Annotated[str, Field(min_length=1, max_length=MAX_ENV_NAME_CHARS), AfterValidator(_env_name)]
EnvValue = Annotated[str, Field(max_length=MAX_ARG_CHARS), AfterValidator(_no_controls)]
Env = Annotated[
    dict[EnvName, EnvValue],
    Field(
        max_length=MAX_ENV,
        description=f"At most {MAX_ENV} variables; names match {ENV_NAME_PATTERN} and are neither one "
        f"the platform sets ({', '.join(sorted(RESERVED_ENV))}) nor {RESERVED_ENV_PREFIX}*; values up "
        f"to {MAX_ARG_CHARS} characters.",
    ),
]
WorkingDir = Annotated[
    str,
    Field(min_length=1, max_length=MAX_PATH_CHARS, description="Absolute working directory."),
    AfterValidator(_absolute),
]
CpuMillis = Annotated[
    int,
    Field(
        ge=MIN_CPU_MILLIS,
        le=MAX_CPU_MILLIS,
        description=f"CPU limit in millicores (1000 = one core), {MIN_CPU_MILLIS} to {MAX_CPU_MILLIS}.",
    ),
]
MemoryBytes = Annotated[
    int,
    Field(
        ge=MIN_MEMORY_BYTES,
        le=MAX_MEMORY_BYTES,
        description=f"Host memory limit in bytes, {MIN_MEMORY_BYTES} (4 MiB) to {MAX_MEMORY_BYTES} (16 TiB).",
    ),
]
GraceSeconds = Annotated[
    float,
    Field(
        ge=0,
        le=MAX_GRACE_S,
        description=f"Seconds between SIGTERM and SIGKILL on cancel or preemption (0 to {MAX_GRACE_S:g}).",
    ),
]


#: Signals a workload may be asked to checkpoint with: those a program can catch (never SIGKILL or SIGSTOP).
CHECKPOINT_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGWINCH")
DEFAULT_CHECKPOINT_TIMEOUT_S, MAX_CHECKPOINT_TIMEOUT_S = 60.0, 3600.0
MAX_CHECKPOINT_ARGV = 32


def _checkpoint_signal(name: str) -> str:
    if name not in CHECKPOINT_SIGNALS:
        raise ValueError(f"expected one of {', '.join(CHECKPOINT_SIGNALS)}")
    return name


class CheckpointRequest(BaseModel):
    """How a migrating workload is asked to checkpoint: a signal or a command, and how long it may take."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    signal: Annotated[str, AfterValidator(_checkpoint_signal)] | None = Field(
        default=None, description=f"Sent to its process group: one of {', '.join(CHECKPOINT_SIGNALS)}."
    )
    command: Annotated[list[Arg], Field(min_length=1, max_length=MAX_CHECKPOINT_ARGV)] | None = Field(
        default=None,
        description=f"Or run in its environment and working directory (1 to {MAX_CHECKPOINT_ARGV} items); "
        "exit 0 means checkpointed.",
    )
    timeout_s: float = Field(
        default=DEFAULT_CHECKPOINT_TIMEOUT_S,
        ge=1,
        le=MAX_CHECKPOINT_TIMEOUT_S,
        description="Seconds it may take before the move goes on without it "
        f"(1 to {MAX_CHECKPOINT_TIMEOUT_S:g}).",
    )

    @model_validator(mode="after")
    def _one_way(self) -> CheckpointRequest:
        if (self.signal is None) == (self.command is None):
            raise ValueError("give exactly one of signal and command")
        return self


def run_size_problem(
    *, command: Sequence[str], args: Sequence[str], env: Mapping[str, str]
) -> tuple[str, str] | None:
    """The field and why, when command, args and env together pass the bounds one field cannot check."""
    if len(command) + len(args) > MAX_ARGV:
        return "args", f"command and args together hold at most {MAX_ARGV} items"
    argv_chars = sum(map(len, command)) + sum(map(len, args))
    env_chars = sum(len(k) + len(v) for k, v in env.items())
    if argv_chars + env_chars > MAX_RUN_CHARS:
        field = "env" if env_chars > argv_chars else "args" if args else "command"
        return field, f"command, args and env together hold at most {MAX_RUN_CHARS} characters"
    return None


class RunRequest(BaseModel):
    """A workload's run as stored and placed: the resolved OCI image reference and the request's run."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    image: str | None = Field(default=None, description="OCI image reference resolved from the catalog.")
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    working_dir: str | None = None
    cpu_millis: int | None = None
    memory_bytes: int | None = None
    time_limit_s: float | None = None
    grace_s: float = DEFAULT_GRACE_S
    checkpoint: CheckpointRequest | None = None
