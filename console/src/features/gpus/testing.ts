// What the GPU tests share: a uPlot stand-in (jsdom has no canvas) that records setData, and sample fixtures.
import { vi } from "vitest";

export const charts: { data: unknown[]; destroyed: boolean }[] = [];

export class FakeUPlot {
  readonly state = { data: [] as unknown[], destroyed: false };
  constructor(_opts: unknown, data: unknown) {
    this.state.data.push(data);
    charts.push(this.state);
  }
  setData(data: unknown) {
    this.state.data.push(data);
  }
  setSize() {}
  destroy() {
    this.state.destroyed = true;
  }
}

export function noCanvas() {
  vi.spyOn(HTMLCanvasElement.prototype, "getContext").mockReturnValue(null);
}
