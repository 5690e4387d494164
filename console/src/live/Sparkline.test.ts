import { describe, expect, it } from "vitest";
import { sparklinePaths } from "./Sparkline";

describe("sparklinePaths", () => {
  it("draws nothing before two points", () => {
    expect(sparklinePaths(new Float64Array([]), 100)).toEqual([]);
    expect(sparklinePaths(new Float64Array([50]), 100)).toEqual([]);
  });

  it("maps the last 60 values across the width and 0..max up the height, clamped", () => {
    const [line] = sparklinePaths(new Float64Array([0, 100, 250]), 100, 59, 24);
    // x: one unit per point; y: 0 at the bottom (23), max at the top (1), above max clamped to it.
    expect(line).toBe("0.0,23.0 1.0,1.0 2.0,1.0");
  });

  it("breaks the line at a gap (a sample without the metric) and drops a lone point", () => {
    const runs = sparklinePaths(new Float64Array([10, 20, NaN, 30, NaN, 40, 50]), 100, 59, 24);
    expect(runs).toHaveLength(2);
    expect(runs[0].split(" ")).toHaveLength(2);
    expect(runs[1].split(" ")).toEqual(["5.0,14.2", "6.0,12.0"]);
  });

  it("keeps only the newest 60 values", () => {
    const values = Float64Array.from({ length: 90 }, (_, i) => i);
    const [line] = sparklinePaths(values, 100, 59, 24);
    expect(line.split(" ")).toHaveLength(60);
    expect(line.startsWith("0.0,")).toBe(true);
    expect(line.endsWith(`59.0,${(24 - (89 / 100) * 22 - 1).toFixed(1)}`)).toBe(true);
  });
});
