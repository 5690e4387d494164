// Fixed-size columnar ring buffers for live series, as uPlot's streaming demos keep them: one Float64Array per
// metric plus the timestamps. Each column is stored twice over (slot i and i + capacity), so the points in time
// order are always one contiguous subarray: a chart gets zero-copy views, and a write never allocates.

/** The sample fields kept per GPU (null or absent in a sample → NaN, which the charts draw as a gap). */
export const METRICS = [
  "sm_util_pct",
  "mem_util_pct",
  "tensor_active_pct",
  "pcie_tx_bytes_per_s",
  "pcie_rx_bytes_per_s",
  "fb_used_pct",
  "fb_used_bytes",
  "fb_total_bytes",
  "gpu_temp_c",
  "mem_temp_c",
  "power_w",
  "power_limit_w",
  "ecc_sbe_count",
  "ecc_dbe_count",
  "xid_count",
] as const;
export type Metric = (typeof METRICS)[number];

/** 5 minutes at 1 Hz. */
export const DEFAULT_CAPACITY = 300;

/** One point to append: seconds since the epoch and whatever metrics it has. */
export interface Point {
  ts: number;
  values: Partial<Record<Metric, number | null | undefined>>;
}

export class SeriesBuffer {
  readonly capacity: number;
  private readonly times: Float64Array;
  private readonly columns: Record<Metric, Float64Array>;
  private head = 0; // the slot the next point goes to, in [0, capacity)
  private count = 0;

  constructor(capacity: number = DEFAULT_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`capacity must be a positive integer, not ${capacity}`);
    this.capacity = capacity;
    this.times = new Float64Array(2 * capacity);
    this.columns = Object.fromEntries(METRICS.map((m) => [m, new Float64Array(2 * capacity)])) as Record<Metric, Float64Array>;
  }

  get length(): number {
    return this.count;
  }

  /** Seconds of the newest point, or NaN when empty. */
  get lastTs(): number {
    return this.count === 0 ? Number.NaN : this.times[this.head === 0 ? this.capacity - 1 : this.head - 1];
  }

  /** Appends a point; one not newer than the last (a replayed event) is dropped. Returns whether it was kept. */
  push(point: Point): boolean {
    if (!Number.isFinite(point.ts) || (this.count > 0 && point.ts <= this.lastTs)) return false;
    const i = this.head;
    const j = i + this.capacity;
    this.times[i] = this.times[j] = point.ts;
    for (const metric of METRICS) {
      const value = point.values[metric];
      this.columns[metric][i] = this.columns[metric][j] = typeof value === "number" ? value : Number.NaN;
    }
    this.head = (i + 1) % this.capacity;
    if (this.count < this.capacity) this.count += 1;
    return true;
  }

  /** Adds older points (the history loaded at first) before the live ones, keeping the newest `capacity`. */
  backfill(points: Point[]): void {
    const first = this.count === 0 ? Number.POSITIVE_INFINITY : this.times[this.start()];
    const older = points.filter((p) => p.ts < first).sort((a, b) => a.ts - b.ts);
    if (older.length === 0) return;
    const kept = this.points();
    this.head = 0;
    this.count = 0;
    for (const point of [...older, ...kept].slice(-this.capacity)) this.push(point);
  }

  /** The timestamps in time order (a view, valid until the next write). */
  timestamps(): Float64Array {
    const start = this.start();
    return this.times.subarray(start, start + this.count);
  }

  /** One metric's values in time order (a view, valid until the next write). */
  column(metric: Metric): Float64Array {
    const start = this.start();
    return this.columns[metric].subarray(start, start + this.count);
  }

  /** The newest value of a metric, or NaN. */
  latest(metric: Metric): number {
    return this.count === 0 ? Number.NaN : this.columns[metric][this.head === 0 ? this.capacity - 1 : this.head - 1];
  }

  /** Copies of every point, oldest first (tests and backfill; not for the hot path). */
  points(): Point[] {
    const ts = this.timestamps();
    const cols = METRICS.map((m) => [m, this.column(m)] as const);
    return Array.from(ts, (t, k) => ({ ts: t, values: Object.fromEntries(cols.map(([m, c]) => [m, c[k]])) }));
  }

  private start(): number {
    return (this.head - this.count + this.capacity) % this.capacity;
  }
}
