// Priority classes as the scheduler's queue preview names them: each is an urgency (and low is preemptible spot).
import type { PriorityClass } from "./queries";

export const PRIORITY_CLASSES: Record<PriorityClass, { urgency: number; preemptible: boolean; label: string }> = {
  high: { urgency: 1, preemptible: false, label: "High (urgency 1.0)" },
  normal: { urgency: 0.5, preemptible: false, label: "Normal (urgency 0.5)" },
  low: { urgency: 0, preemptible: true, label: "Low (urgency 0, preemptible spot)" },
};

/** The class nearest a draft's urgency (a described or older draft may hold any urgency in [0, 1]). */
export function classOf(urgency: number): PriorityClass {
  if (urgency >= 0.75) return "high";
  if (urgency < 0.25) return "low";
  return "normal";
}
