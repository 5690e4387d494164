// A time as people read it: relative in the text, absolute (UTC ISO) in the title attribute.
import { Text, Tooltip } from "@mantine/core";

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["day", 86_400],
  ["hour", 3_600],
  ["minute", 60],
  ["second", 1],
];
const rtf = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** "3 minutes ago", "in 20 seconds": the largest unit that fits. */
export function relativeTime(iso: string, now: number = Date.now()): string {
  const seconds = (Date.parse(iso) - now) / 1000;
  if (!Number.isFinite(seconds)) return "unknown time";
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") return rtf.format(Math.round(seconds / size), unit);
  }
  return iso;
}

export function absoluteTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function TimeAgo({ at, size = "sm" }: { at: string | null | undefined; size?: string }) {
  if (!at) return <Text span size={size}>—</Text>;
  const absolute = absoluteTime(at);
  return (
    <Tooltip label={absolute}>
      <Text span size={size} title={absolute}>
        <time dateTime={at}>{relativeTime(at)}</time>
      </Text>
    </Tooltip>
  );
}
