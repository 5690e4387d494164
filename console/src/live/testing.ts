// A scripted EventSource for tests: records every stream opened, lets a test emit events and errors.
import type { EventSourceFactory, EventSourceLike } from "./LiveProvider";

export class FakeEventSource implements EventSourceLike {
  readyState = 0;
  onopen: ((event: Event) => void) | null = null;
  onerror: ((event: Event) => void) | null = null;
  closed = false;
  private readonly handlers = new Map<string, ((event: MessageEvent<string>) => void)[]>();

  constructor(readonly url: string) {}

  addEventListener(type: string, listener: (event: MessageEvent<string>) => void): void {
    this.handlers.set(type, [...(this.handlers.get(type) ?? []), listener]);
  }

  close(): void {
    this.closed = true;
    this.readyState = 2;
  }

  /** The `gpus` this stream asked for. */
  get gpus(): string[] {
    const value = new URL(this.url, "http://x").searchParams.get("gpus");
    return value ? value.split(",") : [];
  }

  open(): void {
    this.readyState = 1;
    this.onopen?.(new Event("open"));
  }

  fail(closed = false): void {
    this.readyState = closed ? 2 : 0;
    this.onerror?.(new Event("error"));
  }

  emit(type: string, body: unknown): void {
    const event = new MessageEvent<string>(type, { data: JSON.stringify(body) });
    this.handlers.get(type)?.forEach((handler) => handler(event));
  }
}

/** A factory recording the streams it opened; `latest()` is the one in use. */
export function fakeEventSources() {
  const opened: FakeEventSource[] = [];
  const create: EventSourceFactory = (url) => {
    const source = new FakeEventSource(url);
    opened.push(source);
    return source;
  };
  const latest = () => opened[opened.length - 1];
  return { create, opened, latest, open: () => opened.filter((s) => !s.closed) };
}

/** A samples row as telemetry sends it, with defaults for the fields a test does not care about. */
export function sampleRow(gpu: string, at: string | number, fields: Record<string, unknown> = {}) {
  return {
    gpu,
    node: "node-a",
    index: 0,
    model: "A100-SXM4-80GB",
    at: typeof at === "number" ? new Date(at * 1000).toISOString() : at,
    sm_util_pct: 50,
    mem_util_pct: 30,
    fb_used_bytes: 40e9,
    fb_total_bytes: 80e9,
    fb_used_pct: 50,
    gpu_temp_c: 60,
    power_w: 250,
    power_limit_w: 400,
    ecc_dbe_count: 0,
    xid_count: 0,
    tenant_id: "acme",
    workload_id: "wl-1",
    ...fields,
  };
}
