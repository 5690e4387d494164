// Prometheus durations (30s, 5m, 1h30m, 2d, 1w) as seconds, for the silence form and the `for` countdown.
const UNIT_S: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400, w: 604_800, y: 31_536_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)/gy;

/** Seconds, or null when `text` is not a duration. */
export function parseDuration(text: string): number | null {
  const value = text.trim();
  if (value === "") return null;
  PART.lastIndex = 0;
  let total = 0;
  let end = 0;
  for (let match = PART.exec(value); match; match = PART.exec(value)) {
    total += Number(match[1]) * UNIT_S[match[2]];
    end = PART.lastIndex;
  }
  return end === value.length ? total : null;
}

/** "fires in 42s", "fires in 3m 5s", or "fires now". */
export function firesIn(seconds: number): string {
  if (seconds <= 0) return "fires now";
  const s = Math.ceil(seconds);
  return s < 60 ? `fires in ${s}s` : `fires in ${Math.floor(s / 60)}m ${s % 60}s`;
}
