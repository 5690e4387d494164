// A live value as text, written straight into the DOM on each sample (no React render per update).
import { useEffect, useRef } from "react";
import { formatValue } from "./format";
import { useGpuSeries } from "./LiveProvider";
import type { Metric } from "./ring";

export function LiveText({
  gpu,
  metric,
  format = (v) => formatValue(metric, v),
  initial = "no data yet",
}: {
  gpu: string;
  metric: Metric;
  format?: (value: number) => string;
  initial?: string;
}) {
  const series = useGpuSeries(gpu);
  const span = useRef<HTMLSpanElement>(null);
  const formatRef = useRef(format);
  formatRef.current = format;
  useEffect(() => {
    if (!series) return;
    const paint = () => {
      if (span.current && series.buffer.length > 0) span.current.textContent = formatRef.current(series.buffer.latest(metric));
    };
    paint();
    return series.subscribe(paint);
  }, [series, metric]);
  return <span ref={span}>{series ? initial : "live data unavailable"}</span>;
}
