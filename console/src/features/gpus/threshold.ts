// The temperature line on a GPU's chart: the alert rule over gpu_temp_c that would fire first for this GPU.
import { allMatch } from "../alerts/matchers";
import type { Rule } from "../alerts/queries";

export interface Threshold {
  value: number;
  rule: Rule;
}

/** The lowest ">"/">=" threshold rule over `metric` whose matchers hold for the GPU's labels, or null. */
export function thresholdFor(rules: Rule[], metric: string, labels: Record<string, string>): Threshold | null {
  const applicable = rules.filter(
    (r) => r.kind === "threshold" && r.metric === metric && (r.comparator === ">" || r.comparator === ">=") && allMatch(r.matchers, labels),
  );
  if (applicable.length === 0) return null;
  const rule = applicable.reduce((a, b) => (b.threshold < a.threshold ? b : a));
  return { value: rule.threshold, rule };
}
