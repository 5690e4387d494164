// How live values read as text (charts' latest values, aria-labels, the GPU list).
import type { Metric } from "./ring";

const GIB = 2 ** 30;

export function formatValue(metric: Metric, value: number): string {
  if (!Number.isFinite(value)) return "not reported";
  switch (metric) {
    case "sm_util_pct":
    case "mem_util_pct":
    case "tensor_active_pct":
    case "fb_used_pct":
      return `${value.toFixed(0)}%`;
    case "pcie_tx_bytes_per_s":
    case "pcie_rx_bytes_per_s":
      return `${(value / 1e9).toFixed(2)} GB/s`;
    case "fb_used_bytes":
    case "fb_total_bytes":
      return `${(value / GIB).toFixed(1)} GiB`;
    case "gpu_temp_c":
    case "mem_temp_c":
      return `${value.toFixed(0)} °C`;
    case "power_w":
    case "power_limit_w":
      return `${value.toFixed(0)} W`;
    default:
      return `${Math.round(value)}`;
  }
}
