// A migration's progress as a labelled bar with its value and phase in words beside it.
import { Group, Progress, Text } from "@mantine/core";

export function ProgressBar({ label, percent, detail }: { label: string; percent: number; detail?: string }) {
  const value = Math.max(0, Math.min(100, Math.round(percent)));
  return (
    <Group gap="xs" wrap="nowrap">
      <Progress.Root size="lg" style={{ flex: 1 }}>
        <Progress.Section value={value} aria-label={label} color={value >= 100 ? "green" : "blue"} />
      </Progress.Root>
      <Text size="sm" style={{ whiteSpace: "nowrap" }}>
        {value}%{detail ? ` · ${detail}` : ""}
      </Text>
    </Group>
  );
}
