// The resources step as a form, the request body it becomes, and what an hour of it costs at the listed prices.
import type { Catalog, Price } from "./queries";

export type ResourceKind = "gpu" | "mig" | "units";

export interface ResourceForm {
  kind: ResourceKind;
  model: string;
  count: number;
  profile: string;
  units: number;
}

export const EMPTY_RESOURCES: ResourceForm = { kind: "gpu", model: "", count: 1, profile: "", units: 1 };

/** The PUT body of the resources step: a GPU, MIG or units request, by its kind. */
export function resourceBody(form: ResourceForm): Record<string, unknown> {
  if (form.kind === "gpu") return { kind: "gpu", model: form.model, count: form.count };
  if (form.kind === "mig") return form.model ? { kind: "mig", profile: form.profile, model: form.model } : { kind: "mig", profile: form.profile };
  return { kind: "units", units: form.units };
}

/** A filled draft's resources step back into the form. */
export function resourceForm(step: Record<string, unknown> | null | undefined): ResourceForm {
  if (!step) return EMPTY_RESOURCES;
  const kind = (step.kind as ResourceKind | undefined) ?? "gpu";
  return {
    kind,
    model: typeof step.model === "string" ? step.model : "",
    count: typeof step.count === "number" ? step.count : 1,
    profile: typeof step.profile === "string" ? step.profile : "",
    units: typeof step.units === "number" ? step.units : 1,
  };
}

/** Words for a resources request: "2 × A100-80GB", "MIG 1g.10gb on A100-80GB", "4 compute units". */
export function describeResources(form: ResourceForm): string {
  if (form.kind === "gpu") return `${form.count} × ${form.model || "(no model)"}`;
  if (form.kind === "mig") return `MIG ${form.profile || "(no profile)"}${form.model ? ` on ${form.model}` : ""}`;
  return `${form.units} compute units`;
}

function inForce(price: Price, now: Date): boolean {
  const from = new Date(price.effective_from).getTime();
  const to = price.effective_to ? new Date(price.effective_to).getTime() : Infinity;
  return from <= now.getTime() && now.getTime() < to;
}

export interface HourPrice {
  micro: number;
  detail: string;
}

/** The on-demand price per hour of a request, or null when no listed price applies (e.g. units on any model). */
export function pricePerHour(form: ResourceForm, prices: Price[], catalog: Catalog, now: Date = new Date()): HourPrice | null {
  const live = prices.filter((p) => p.pricing_class === "on_demand" && p.share_of === null && inForce(p, now));
  const model = catalog.models.find((m) => m.name === form.model);
  if (form.kind === "gpu" && model) {
    const price = live.find((p) => p.gpu_model === model.name && p.mig_profile === null);
    if (!price) return null;
    const perGpu = price.basis === "gpu_hour" ? price.micro_per_hour : price.micro_per_hour * Number(model.units);
    return { micro: perGpu * form.count, detail: `${form.count} × ${model.name} (${price.price_id})` };
  }
  if (form.kind === "mig" && form.profile) {
    const price = live.find((p) => p.mig_profile === form.profile && (!form.model || p.gpu_model === form.model));
    if (!price) return null;
    const profile = catalog.models.find((m) => m.name === price.gpu_model)?.mig_profiles.find((p) => p.name === form.profile);
    const units = profile ? Number(profile.units) : 1;
    const micro = price.basis === "gpu_hour" ? price.micro_per_hour : price.micro_per_hour * units;
    return { micro, detail: `MIG ${form.profile} on ${price.gpu_model} (${price.price_id})` };
  }
  if (form.kind === "units") {
    const perUnit = live.filter((p) => p.basis === "compute_unit_hour" && p.mig_profile === null);
    if (perUnit.length === 0) return null;
    const cheapest = perUnit.reduce((a, b) => (b.micro_per_hour < a.micro_per_hour ? b : a));
    return { micro: cheapest.micro_per_hour * form.units, detail: `from ${cheapest.gpu_model} at its unit price` };
  }
  return null;
}

/** "1 h 20 min" for a duration in seconds. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "unknown";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${Math.max(minutes, 1)} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
}
