// One uPlot, created once, sized to its container (ResizeObserver), destroyed on unmount. Callers stream into
// it through `onCreate` (call chart.setData on each update): the chart redraws without a React render.
import { Box } from "@mantine/core";
import { useEffect, useRef } from "react";
import uPlot from "uplot";

export interface UPlotChartProps {
  /** Read once, when the chart is created. */
  options: Omit<uPlot.Options, "width" | "height">;
  /** The data the chart starts with. */
  data: uPlot.AlignedData;
  height?: number;
  /** Called with the new chart; may return a cleanup (an unsubscribe), run before the chart is destroyed. */
  onCreate?: (chart: uPlot) => void | (() => void);
}

const FALLBACK_WIDTH = 300;

export function UPlotChart({ options, data, height = 160, onCreate }: UPlotChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const latest = useRef({ options, data, onCreate });
  latest.current = { options, data, onCreate };

  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const { options: opts, data: initial, onCreate: created } = latest.current;
    const width = () => Math.max(element.clientWidth || FALLBACK_WIDTH, 50);
    const chart = new uPlot({ ...opts, width: width(), height }, initial, element);
    const cleanup = created?.(chart);
    const observer = new ResizeObserver(() => chart.setSize({ width: width(), height }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      cleanup?.();
      chart.destroy();
    };
  }, [height]);

  return <Box ref={box} w="100%" mih={height} />;
}
