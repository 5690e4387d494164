// A cheap live sparkline for lists (64 GPUs at 1 Hz): one SVG polyline per GPU, its points rewritten straight
// from the ring buffer; the aria-label and the visible value are written into the DOM, not through React state.
// SVG, not a canvas: Chromium composites every 2D canvas as its own layer, and a table cell painted after a
// composited canvas is then lifted into a layer of its own (overlap), so 64 canvases cost the frame about 60
// layers to build, commit and draw; a polyline is painted into the table's layer like its text.
import { Group, Text } from "@mantine/core";
import { useEffect, useRef } from "react";
import { formatValue } from "./format";
import "./live.css";
import { watchOnScreen, writeText } from "./onScreen";
import { useGpuSeries } from "./LiveProvider";
import type { Metric } from "./ring";

const POINTS = 60;
const WIDTH = 96;
const HEIGHT = 24;

/**
 * The `points` of one polyline per run of finite values among the last POINTS: a gap (a sample without the
 * metric, a GPU not reporting for a while) breaks the line, and a lone point between gaps draws nothing.
 */
export function sparklinePaths(values: Float64Array, max: number, width = WIDTH, height = HEIGHT): string[] {
  const shown = values.subarray(Math.max(0, values.length - POINTS));
  const runs: string[] = [];
  if (shown.length < 2) return runs;
  let run: string[] = [];
  for (let i = 0; i < shown.length; i++) {
    const v = shown[i];
    if (!Number.isFinite(v)) {
      if (run.length > 1) runs.push(run.join(" "));
      run = [];
      continue;
    }
    const x = (i / (POINTS - 1)) * width;
    const y = height - (Math.min(Math.max(v, 0), max) / max) * (height - 2) - 1;
    run.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  }
  if (run.length > 1) runs.push(run.join(" "));
  return runs;
}

function draw(svg: SVGSVGElement, values: Float64Array, max: number) {
  const runs = sparklinePaths(values, max);
  const lines = svg.children;
  for (let i = 0; i < runs.length; i++) {
    let line = lines[i] as SVGPolylineElement | undefined;
    if (!line) {
      line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
      svg.appendChild(line);
    }
    if (line.getAttribute("points") !== runs[i]) line.setAttribute("points", runs[i]);
  }
  while (lines.length > runs.length) svg.lastElementChild!.remove();
}

export function Sparkline({ gpu, metric, title, max = 100 }: { gpu: string; metric: Metric; title: string; max?: number }) {
  const series = useGpuSeries(gpu);
  const svg = useRef<SVGSVGElement>(null);
  const box = useRef<HTMLDivElement>(null);
  const value = useRef<HTMLSpanElement>(null);

  useEffect(() => {
    if (!series || !svg.current) return;
    // Only a sparkline on screen redraws its line and rewrites its value (a long list has most of its 64 rows
    // scrolled away); one scrolled back into view draws at once. The label always follows (an attribute costs no
    // layout).
    const element = svg.current;
    let visible = true;
    const paint = () => {
      const { buffer } = series;
      const latest = buffer.length > 0 ? formatValue(metric, buffer.latest(metric)) : "no data yet";
      box.current?.setAttribute("aria-label", `${title}: ${buffer.length} points, latest ${latest}`);
      if (!visible) return;
      if (value.current && buffer.length > 0) writeText(value.current, latest);
      draw(element, buffer.column(metric), max);
    };
    const unwatch = watchOnScreen(element, (now) => {
      visible = now;
      if (visible) paint();
    });
    paint();
    const unsubscribe = series.subscribe(paint);
    return () => {
      unsubscribe();
      unwatch();
    };
  }, [series, metric, title, max]);

  return (
    <Group gap="xs" wrap="nowrap">
      <div ref={box} role="img" aria-label={`${title}: 0 points, latest no data yet`}>
        <svg ref={svg} className="sparkline" width={WIDTH} height={HEIGHT} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} aria-hidden="true" />
      </div>
      <Text size="sm" component="span">
        {/* The value's box inside the flex item, not the item itself: a flex item is no relayout boundary. */}
        {series ? (
          <span ref={value} className="live-value" style={{ width: "4.5em" }}>
            —
          </span>
        ) : (
          "live data unavailable"
        )}
      </Text>
    </Group>
  );
}
