// The live data layer: one SSE stream per tab, ring buffers per GPU, charts that redraw outside React.
export { LiveBadge } from "./LiveBadge";
export { LiveChart, type ChartLine, type ChartSeries, type LiveChartProps } from "./LiveChart";
export {
  LiveProvider,
  liveUrl,
  useConnectionState,
  useGpuSeries,
  useLiveGpus,
  useLiveStore,
  type EventSourceFactory,
  type EventSourceLike,
} from "./LiveProvider";
export { LiveText } from "./LiveText";
export { Sparkline } from "./Sparkline";
export { formatValue } from "./format";
export { ALERTS_KEY, INCIDENTS_KEY } from "./keys";
export { DEFAULT_CAPACITY, METRICS, SeriesBuffer, type Metric, type Point } from "./ring";
export { LiveStore, UPDATE_MARK, UPDATE_MEASURE, type ConnectionState, type LiveSample } from "./store";
