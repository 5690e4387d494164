// A 1 Hz chart of one GPU's live series: uPlot fed from the ring buffer's zero-copy views. The wrapper is an
// image to assistive technology, labelled "<title>: <n> points, latest <value>"; the latest value is also text.
import { Group, Paper, Stack, Text } from "@mantine/core";
import { useCallback, useEffect, useMemo, useRef } from "react";
import type uPlot from "uplot";
import { UPlotChart } from "../components/UPlotChart";
import { formatValue } from "./format";
import { useGpuSeries } from "./LiveProvider";
import type { Metric, SeriesBuffer } from "./ring";

export interface ChartSeries {
  metric: Metric;
  label: string;
  color: string;
  dash?: number[];
}

export interface ChartLine {
  value: number;
  label: string;
}

export interface LiveChartProps {
  gpu: string;
  title: string;
  /** The first series is the one the label and the visible text report. */
  series: ChartSeries[];
  /** A horizontal reference line (e.g. an alert threshold). */
  line?: ChartLine | null;
  /** Axis tick text from a raw value (e.g. bytes → GiB). */
  tick?: (value: number) => string;
  range?: [number, number];
  /** Shown after the latest value (e.g. "= 40 GiB of 80 GiB"), from the buffer's newest point. */
  describe?: (buffer: SeriesBuffer) => string;
  height?: number;
}

function options(props: LiveChartProps): Omit<uPlot.Options, "width" | "height"> {
  const series: uPlot.Series[] = [{}, ...props.series.map((s) => ({ label: s.label, stroke: s.color, width: 1.5, dash: s.dash }))];
  if (props.line) series.push({ label: props.line.label, stroke: "#e03131", width: 1, dash: [6, 4], points: { show: false } });
  const tick = props.tick;
  return {
    legend: { show: false },
    cursor: { show: false },
    scales: { x: { time: true }, y: props.range ? { range: props.range } : {} },
    axes: [{}, tick ? { values: (_u, splits) => splits.map(tick), size: 60 } : { size: 50 }],
    series,
  };
}

export function LiveChart(props: LiveChartProps) {
  const { gpu, title, series, line } = props;
  const live = useGpuSeries(gpu);
  const box = useRef<HTMLDivElement>(null);
  const text = useRef<HTMLSpanElement>(null);
  const missing = useRef<HTMLSpanElement>(null);
  const flat = useRef(new Float64Array(0));
  // Read once per chart: a caller that changes the line or the series gives the chart a new key.
  const opts = useMemo(() => options(props), [title]);
  const primary = series[0].metric;

  const data = useCallback((): uPlot.AlignedData => {
    if (!live) return [[]];
    const { buffer } = live;
    const columns: Float64Array[] = [buffer.timestamps(), ...series.map((s) => buffer.column(s.metric))];
    if (line) {
      if (flat.current.length !== buffer.capacity) flat.current = new Float64Array(buffer.capacity).fill(line.value);
      columns.push(flat.current.subarray(0, buffer.length));
    }
    return columns as uPlot.AlignedData;
  }, [live, series, line]);

  const label = useCallback(() => {
    if (!live) return;
    const { buffer } = live;
    const latest = buffer.length > 0 ? formatValue(primary, buffer.latest(primary)) : "no data yet";
    box.current?.setAttribute("aria-label", `${title}: ${buffer.length} points, latest ${latest}`);
    const extra = buffer.length > 0 && props.describe ? ` ${props.describe(buffer)}` : "";
    if (text.current) text.current.textContent = `Latest: ${latest}${extra}`;
    if (missing.current) {
      const absent = buffer.length > 0 ? series.filter((s) => !Number.isFinite(buffer.latest(s.metric))) : [];
      missing.current.textContent = absent.map((s) => `${s.label}: not reported by this GPU.`).join(" ");
    }
  }, [live, title, primary, series, props]);

  useEffect(() => {
    label();
    return live?.subscribe(label);
  }, [live, label]);

  const onCreate = useCallback(
    (chart: uPlot) => live?.subscribe(() => chart.setData(data())),
    [live, data],
  );

  return (
    <Paper withBorder p="sm" radius="md">
      <Stack gap={4}>
        <Group justify="space-between" gap="xs">
          <Text fw={600} component="h3" size="sm" m={0}>
            {title}
          </Text>
          <Text size="sm" component="span" ref={text}>
            {live ? "Latest: no data yet" : "Live data unavailable"}
          </Text>
        </Group>
        <Text size="xs" component="p" m={0}>
          {[...series.map((s) => s.label), ...(line ? [line.label] : [])].join(" · ")}
        </Text>
        <div ref={box} role="img" aria-label={`${title}: 0 points, latest no data yet`}>
          {live ? <UPlotChart options={opts} data={data()} onCreate={onCreate} height={props.height ?? 160} /> : null}
        </div>
        <Text size="xs" component="span" ref={missing} />
      </Stack>
    </Paper>
  );
}
