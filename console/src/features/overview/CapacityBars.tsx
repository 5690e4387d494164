// One stacked bar per capacity group: allocated, free, fragmented and unavailable compute units, each with its number.
import { Group, Progress, Stack, Text, Title } from "@mantine/core";
import type { CapacityFigures } from "./queries";

interface Part {
  name: string;
  units: number;
  color: string;
}

function num(value: string | number): number {
  const n = typeof value === "number" ? value : Number.parseFloat(value);
  return Number.isFinite(n) ? n : 0;
}

function fmt(units: number): string {
  return units.toLocaleString("en", { maximumFractionDigits: 2 });
}

/** The four parts of a bar; `free` here excludes fragmented units (free on partly used GPUs), so they add up. */
export function capacityParts(figures: CapacityFigures): Part[] {
  const fragmented = num(figures.fragmented_units);
  return [
    { name: "Allocated", units: num(figures.allocated_units), color: "blue" },
    { name: "Free", units: Math.max(num(figures.free_units) - fragmented, 0), color: "teal" },
    { name: "Fragmented", units: fragmented, color: "yellow" },
    { name: "Unavailable", units: num(figures.unavailable_units), color: "red" },
  ];
}

export function CapacityBar({ label, figures }: { label: string; figures: CapacityFigures }) {
  const total = num(figures.total_units);
  const parts = capacityParts(figures);
  return (
    <Stack gap={4}>
      <Group justify="space-between" gap="xs">
        <Text fw={500}>{label}</Text>
        <Text size="sm">
          {fmt(total)} units · {figures.total_gpus} {figures.total_gpus === 1 ? "GPU" : "GPUs"}
        </Text>
      </Group>
      <Progress.Root size="xl" aria-label={`${label} capacity`}>
        {parts.map((part) => (
          <Progress.Section
            key={part.name}
            value={total > 0 ? (part.units / total) * 100 : 0}
            color={part.color}
            aria-label={`${label}: ${part.name.toLowerCase()} ${fmt(part.units)} of ${fmt(total)} units`}
          />
        ))}
      </Progress.Root>
      <Text size="sm">
        {parts.map((part) => `${part.name} ${fmt(part.units)}`).join(" · ")} compute units
      </Text>
    </Stack>
  );
}

export function CapacityGroup({ title, groups }: { title: string; groups: Record<string, CapacityFigures> | null | undefined }) {
  const entries = Object.entries(groups ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return (
    <Stack gap="sm">
      <Title order={3}>{title}</Title>
      {entries.length === 0 ? <Text>No capacity in this grouping.</Text> : null}
      {entries.map(([key, figures]) => (
        <CapacityBar key={key} label={key} figures={figures} />
      ))}
    </Stack>
  );
}
