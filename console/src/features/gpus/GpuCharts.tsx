// The 1 Hz charts of one GPU: utilisation on three axes (compute, memory, transfer), temperature against its alert
// threshold, power against its limit, memory used; and its XID and ECC counters as live text.
import { SimpleGrid, Paper, Text, Stack } from "@mantine/core";
import { LiveChart } from "../../live/LiveChart";
import { LiveText } from "../../live/LiveText";
import { formatValue } from "../../live/format";
import type { SeriesBuffer } from "../../live/ring";
import type { Threshold } from "./threshold";

const gbps = (v: number) => `${(v / 1e9).toFixed(1)} GB/s`;

function memoryOf(buffer: SeriesBuffer): string {
  const used = buffer.latest("fb_used_bytes");
  const total = buffer.latest("fb_total_bytes");
  return Number.isFinite(used) && Number.isFinite(total) ? `(${formatValue("fb_used_bytes", used)} of ${formatValue("fb_total_bytes", total)})` : "";
}

function powerOf(buffer: SeriesBuffer): string {
  const limit = buffer.latest("power_limit_w");
  return Number.isFinite(limit) ? `of a ${formatValue("power_limit_w", limit)} limit` : "(no power limit reported)";
}

export function GpuCharts({ gpu, temperature }: { gpu: string; temperature: Threshold | null }) {
  const line = temperature ? { value: temperature.value, label: `Alert threshold ${temperature.value} °C (rule ${temperature.rule.name})` } : null;
  return (
    <SimpleGrid cols={{ base: 1, md: 2 }}>
      <LiveChart
        gpu={gpu}
        title="Compute and memory utilisation"
        series={[
          { metric: "sm_util_pct", label: "Compute (SM) %", color: "#1c7ed6" },
          { metric: "mem_util_pct", label: "Memory controller %", color: "#0ca678" },
        ]}
        range={[0, 100]}
      />
      <LiveChart
        gpu={gpu}
        title="Transfer (PCIe)"
        series={[
          { metric: "pcie_tx_bytes_per_s", label: "PCIe transmit", color: "#ae3ec9" },
          { metric: "pcie_rx_bytes_per_s", label: "PCIe receive", color: "#e8590c" },
        ]}
        tick={gbps}
        describe={(b) => `transmit, ${formatValue("pcie_rx_bytes_per_s", b.latest("pcie_rx_bytes_per_s"))} receive (NVLink throughput is not sampled)`}
      />
      <Stack gap={4}>
        <LiveChart
          key={line?.label ?? "no threshold"}
          gpu={gpu}
          title="Temperature"
          series={[{ metric: "gpu_temp_c", label: "GPU °C", color: "#e8590c" }]}
          line={line}
        />
        <Text size="sm">
          {temperature
            ? `Threshold from alert rule "${temperature.rule.name}": fires when gpu_temp_c ${temperature.rule.comparator} ${temperature.value} for ${temperature.rule.for}.`
            : "No alert rule over gpu_temp_c applies to this GPU, so no threshold is drawn."}
        </Text>
      </Stack>
      <LiveChart
        gpu={gpu}
        title="Power"
        series={[
          { metric: "power_w", label: "Power draw W", color: "#f08c00" },
          { metric: "power_limit_w", label: "Power limit W", color: "#e03131", dash: [6, 4] },
        ]}
        describe={powerOf}
      />
      <LiveChart
        gpu={gpu}
        title="Memory used"
        series={[{ metric: "fb_used_pct", label: "Framebuffer used %", color: "#1c7ed6" }]}
        range={[0, 100]}
        describe={memoryOf}
      />
      <Paper withBorder p="sm" radius="md">
        <Text fw={600} component="h3" size="sm" m={0} mb="xs">
          Error counters
        </Text>
        <SimpleGrid cols={3}>
          <Counter gpu={gpu} label="XID errors" metric="xid_count" />
          <Counter gpu={gpu} label="ECC double-bit" metric="ecc_dbe_count" />
          <Counter gpu={gpu} label="ECC single-bit" metric="ecc_sbe_count" />
        </SimpleGrid>
      </Paper>
    </SimpleGrid>
  );
}

function Counter({ gpu, label, metric }: { gpu: string; label: string; metric: "xid_count" | "ecc_dbe_count" | "ecc_sbe_count" }) {
  return (
    <div>
      <Text size="xs">{label}</Text>
      <Text fw={700} size="lg">
        <LiveText gpu={gpu} metric={metric} />
      </Text>
    </div>
  );
}
