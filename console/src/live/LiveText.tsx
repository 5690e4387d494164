// A live value as text, written straight into the DOM on each sample (no React render per update), and only
// while it is on screen and its text changed: its box is fixed in size and contained (live.css), so a write
// lays out this box alone.
import { useEffect, useRef } from "react";
import { formatValue } from "./format";
import { useGpuSeries } from "./LiveProvider";
import "./live.css";
import { watchOnScreen, writeText } from "./onScreen";
import type { Metric } from "./ring";

export function LiveText({
  gpu,
  metric,
  format = (v) => formatValue(metric, v),
  initial = "no data yet",
  width,
}: {
  gpu: string;
  metric: Metric;
  format?: (value: number) => string;
  initial?: string;
  /** The box's fixed width (CSS), when the longest text it will show is shorter than live.css's default. */
  width?: string;
}) {
  const series = useGpuSeries(gpu);
  const span = useRef<HTMLSpanElement>(null);
  const formatRef = useRef(format);
  formatRef.current = format;
  useEffect(() => {
    const element = span.current;
    if (!series || !element) return;
    let visible = true;
    const paint = () => {
      if (visible && series.buffer.length > 0) writeText(element, formatRef.current(series.buffer.latest(metric)));
    };
    const unwatch = watchOnScreen(element, (now) => {
      visible = now;
      paint();
    });
    paint();
    const unsubscribe = series.subscribe(paint);
    return () => {
      unsubscribe();
      unwatch();
    };
  }, [series, metric]);
  if (!series) return <span>live data unavailable</span>;
  return (
    <span ref={span} className="live-value" style={width ? { width } : undefined}>
      {initial}
    </span>
  );
}
