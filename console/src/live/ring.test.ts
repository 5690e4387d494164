import { describe, expect, it } from "vitest";
import { SeriesBuffer } from "./ring";

const at = (ts: number, sm: number | null = ts * 10) => ({ ts, values: { sm_util_pct: sm } });

describe("SeriesBuffer", () => {
  it("keeps points in time order with every column aligned", () => {
    const buffer = new SeriesBuffer(4);
    [1, 2, 3].forEach((t) => buffer.push(at(t)));
    expect(Array.from(buffer.timestamps())).toEqual([1, 2, 3]);
    expect(Array.from(buffer.column("sm_util_pct"))).toEqual([10, 20, 30]);
    expect(buffer.latest("sm_util_pct")).toBe(30);
    expect(buffer.lastTs).toBe(3);
  });

  it("drops the oldest points once full and still gives one contiguous view", () => {
    const buffer = new SeriesBuffer(3);
    [1, 2, 3, 4, 5].forEach((t) => buffer.push(at(t)));
    expect(buffer.length).toBe(3);
    expect(Array.from(buffer.timestamps())).toEqual([3, 4, 5]);
    expect(Array.from(buffer.column("sm_util_pct"))).toEqual([30, 40, 50]);
    buffer.push(at(6));
    expect(Array.from(buffer.timestamps())).toEqual([4, 5, 6]);
  });

  it("writes without allocating: views share the buffer's storage", () => {
    const buffer = new SeriesBuffer(3);
    [1, 2, 3, 4].forEach((t) => buffer.push(at(t)));
    const a = buffer.column("sm_util_pct");
    buffer.push(at(5));
    expect(buffer.column("sm_util_pct").buffer).toBe(a.buffer);
  });

  it("refuses a point not newer than the last (a replayed event)", () => {
    const buffer = new SeriesBuffer(3);
    expect(buffer.push(at(2))).toBe(true);
    expect(buffer.push(at(2))).toBe(false);
    expect(buffer.push(at(1))).toBe(false);
    expect(buffer.length).toBe(1);
  });

  it("stores a missing metric as NaN", () => {
    const buffer = new SeriesBuffer(3);
    buffer.push(at(1, null));
    expect(buffer.latest("sm_util_pct")).toBeNaN();
    expect(buffer.latest("power_w")).toBeNaN();
  });

  it("backfills history before the live points and keeps the newest capacity", () => {
    const buffer = new SeriesBuffer(4);
    [10, 11].forEach((t) => buffer.push(at(t)));
    buffer.backfill([at(7), at(9), at(8), at(10.5)]);
    expect(Array.from(buffer.timestamps())).toEqual([8, 9, 10, 11]);
    buffer.push(at(12));
    expect(Array.from(buffer.timestamps())).toEqual([9, 10, 11, 12]);
  });

  it("refuses a capacity that is not a positive integer", () => {
    expect(() => new SeriesBuffer(0)).toThrow(/capacity/);
  });
});
