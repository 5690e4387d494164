#!/usr/bin/env bash
# The process runner and the NVML reader on this host's first NVIDIA GPU, in about a minute; the report
# goes to docs/hardware/<date>-<gpu model>.txt (docs/hardware/README.md). Without a GPU: exit 2.
# Options pass through: --seconds N (how long the workload loads the GPU, 20), --out-dir DIR.
# PYTHON picks the interpreter (default: the repo's .venv, else python3).
set -euo pipefail
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "hardware-check: no NVIDIA GPU here (nvidia-smi not found on PATH); nothing checked" >&2
    exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python="python3"; fi
fi
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$python" -m scripts.hardware_check "$@"
