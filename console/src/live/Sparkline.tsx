// A cheap live sparkline for lists (64 GPUs at 1 Hz): one small canvas polyline per GPU, redrawn straight from
// the ring buffer; the aria-label and the visible value are written into the DOM, not through React state.
import { Group, Text } from "@mantine/core";
import { useEffect, useRef } from "react";
import { formatValue } from "./format";
import "./live.css";
import { watchOnScreen, writeText } from "./onScreen";
import { useGpuSeries } from "./LiveProvider";
import type { Metric } from "./ring";

const POINTS = 60;

function draw(canvas: HTMLCanvasElement, values: Float64Array, max: number) {
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const shown = values.subarray(Math.max(0, values.length - POINTS));
  if (shown.length < 2) return;
  ctx.beginPath();
  ctx.strokeStyle = "#1c7ed6";
  ctx.lineWidth = 1.5;
  let drawing = false;
  for (let i = 0; i < shown.length; i++) {
    const v = shown[i];
    if (!Number.isFinite(v)) {
      drawing = false;
      continue;
    }
    const x = (i / (POINTS - 1)) * width;
    const y = height - (Math.min(Math.max(v, 0), max) / max) * (height - 2) - 1;
    if (drawing) ctx.lineTo(x, y);
    else ctx.moveTo(x, y);
    drawing = true;
  }
  ctx.stroke();
}

export function Sparkline({ gpu, metric, title, max = 100 }: { gpu: string; metric: Metric; title: string; max?: number }) {
  const series = useGpuSeries(gpu);
  const canvas = useRef<HTMLCanvasElement>(null);
  const box = useRef<HTMLDivElement>(null);
  const value = useRef<HTMLSpanElement>(null);

  useEffect(() => {
    if (!series || !canvas.current) return;
    // Only a sparkline on screen redraws its canvas and rewrites its value (a long list has most of its 64 rows
    // scrolled away); one scrolled back into view draws at once. The label always follows (an attribute costs no
    // layout).
    const element = canvas.current;
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
        <canvas ref={canvas} width={96} height={24} style={{ display: "block" }} />
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
