// The live state outside React: one SeriesBuffer per GPU, the latest row of each, who listens to which GPU, the
// GPUs the page shows (ref-counted) and the stream's connection state. A samples event writes the buffers and
// calls the listeners (charts redraw themselves with uPlot's setData), so an update never re-renders React.
import { DEFAULT_CAPACITY, METRICS, SeriesBuffer, type Metric } from "./ring";

/** A row of a `samples` event, as telemetry's GET /v1/stream sends it (see LatestSample). */
export interface LiveSample {
  gpu: string;
  node?: string;
  index?: number;
  model?: string;
  at: string;
  workload_id?: string | null;
  tenant_id?: string | null;
  lost_reason?: string | null;
  [metric: string]: unknown;
}

export type ConnectionState = "connecting" | "live" | "reconnecting" | "offline";

export const UPDATE_MARK = "live-update-start";
export const UPDATE_MEASURE = "live-update";
const MAX_MEASURES = 3_600;

type Listener = () => void;

function toPoint(row: LiveSample) {
  const values: Partial<Record<Metric, number | null>> = {};
  for (const metric of METRICS) {
    const value = row[metric];
    values[metric] = typeof value === "number" ? value : null;
  }
  return { ts: Date.parse(row.at) / 1000, values };
}

const perf = (globalThis as { performance?: Performance }).performance;
const canMeasure = typeof perf?.mark === "function" && typeof perf?.measure === "function";

export class LiveStore {
  readonly capacity: number;
  private readonly buffers = new Map<string, SeriesBuffer>();
  private readonly rows = new Map<string, LiveSample>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly wanted = new Map<string, number>();
  private readonly wantedListeners = new Set<Listener>();
  private readonly stateListeners = new Set<Listener>();
  private state: ConnectionState = "connecting";
  private measures = 0;

  constructor({ capacity = DEFAULT_CAPACITY }: { capacity?: number } = {}) {
    this.capacity = capacity;
  }

  /** The GPU's buffer (created empty on first ask, so a chart can subscribe before its first point). */
  buffer(gpu: string): SeriesBuffer {
    let found = this.buffers.get(gpu);
    if (!found) {
      found = new SeriesBuffer(this.capacity);
      this.buffers.set(gpu, found);
    }
    return found;
  }

  /** The newest row of a GPU, or undefined before its first sample. */
  latestRow(gpu: string): LiveSample | undefined {
    return this.rows.get(gpu);
  }

  /** Calls `listener` after each write to the GPU's buffer; returns the unsubscribe. */
  subscribe(gpu: string, listener: Listener): () => void {
    let set = this.listeners.get(gpu);
    if (!set) this.listeners.set(gpu, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(gpu);
    };
  }

  /** One `samples` event's data, measured from parse to the charts' redraw (uPlot commits in a microtask). */
  handleSamplesEvent(data: string): void {
    const start = canMeasure ? (perf!.mark(UPDATE_MARK)?.startTime ?? perf!.now()) : 0;
    try {
      const body = JSON.parse(data) as { samples?: LiveSample[] };
      this.ingest(body.samples ?? []);
    } finally {
      if (canMeasure) queueMicrotask(() => this.measure(start));
    }
  }

  /** Writes rows into their buffers, then tells each touched GPU's listeners once. */
  ingest(rows: LiveSample[]): void {
    const touched: string[] = [];
    for (const row of rows) {
      if (typeof row?.gpu !== "string" || typeof row.at !== "string") continue;
      this.rows.set(row.gpu, row);
      if (this.buffer(row.gpu).push(toPoint(row))) touched.push(row.gpu);
    }
    for (const gpu of touched) this.listeners.get(gpu)?.forEach((listener) => listener());
  }

  /** Adds history before the live points and tells the GPU's listeners. */
  backfill(gpu: string, points: Parameters<SeriesBuffer["backfill"]>[0]): void {
    this.buffer(gpu).backfill(points);
    this.listeners.get(gpu)?.forEach((listener) => listener());
  }

  /** Marks GPUs as shown (ref-counted); returns the release. */
  want(gpus: readonly string[]): () => void {
    const unique = [...new Set(gpus)];
    let changed = false;
    for (const gpu of unique) {
      const n = this.wanted.get(gpu) ?? 0;
      this.wanted.set(gpu, n + 1);
      changed ||= n === 0;
    }
    if (changed) this.wantedListeners.forEach((l) => l());
    let released = false;
    return () => {
      if (released) return;
      released = true;
      let dropped = false;
      for (const gpu of unique) {
        const n = (this.wanted.get(gpu) ?? 1) - 1;
        if (n <= 0) {
          this.wanted.delete(gpu);
          dropped = true;
        } else this.wanted.set(gpu, n);
      }
      if (dropped) this.wantedListeners.forEach((l) => l());
    };
  }

  /** The GPUs shown now, sorted (so the same set always makes the same URL). */
  wantedGpus(): string[] {
    return [...this.wanted.keys()].sort();
  }

  onWantedChange(listener: Listener): () => void {
    this.wantedListeners.add(listener);
    return () => this.wantedListeners.delete(listener);
  }

  connectionState(): ConnectionState {
    return this.state;
  }

  setConnectionState(state: ConnectionState): void {
    if (state === this.state) return;
    this.state = state;
    this.stateListeners.forEach((l) => l());
  }

  onConnectionState(listener: Listener): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  private measure(start: number): void {
    // From this event's own start (two events in one task must not share a mark).
    perf!.measure(UPDATE_MEASURE, { start, end: perf!.now() });
    perf!.clearMarks(UPDATE_MARK);
    this.measures += 1;
    if (this.measures > MAX_MEASURES) {
      perf!.clearMeasures(UPDATE_MEASURE);
      this.measures = 0;
    }
  }
}
