// One EventSource per tab to the gateway's /api/live. Components say which GPUs they show (useLiveGpus); when
// that set changes the stream is reopened (debounced) with the new `gpus`, so only the series on screen are sent.
// EventSource's own reconnect with Last-Event-ID does the resume. Alerts and incidents go into the query cache.
import { useQueryClient, type QueryClient } from "@tanstack/react-query";
import { createContext, useContext, useEffect, useMemo, useState, useSyncExternalStore, type ReactNode } from "react";
import { ALERTS_KEY, INCIDENTS_KEY } from "./keys";
import { LiveStore, type ConnectionState } from "./store";

/** What the provider needs of an EventSource (a fake one in tests). */
export interface EventSourceLike {
  readonly readyState: number;
  onopen: ((event: Event) => void) | null;
  onerror: ((event: Event) => void) | null;
  addEventListener(type: string, listener: (event: MessageEvent<string>) => void): void;
  close(): void;
}
export type EventSourceFactory = (url: string) => EventSourceLike;

const CLOSED = 2;
/** After the browser gives up (a non-200 answer such as 401), try again this much later. */
const RETRY_CLOSED_MS = 5_000;
const LiveContext = createContext<LiveStore | null>(null);

/** The stream's URL for the GPUs shown (sorted, so one set is one URL). */
export function liveUrl(gpus: readonly string[]): string {
  const params = new URLSearchParams({ alerts: "1", incidents: "1" });
  if (gpus.length > 0) params.set("gpus", [...gpus].sort().join(","));
  return `/api/live?${params.toString().replace(/%2C/g, ",")}`;
}

const browserEventSource: EventSourceFactory = (url) => new EventSource(url);

function listen(source: EventSourceLike, store: LiveStore, client: QueryClient) {
  source.addEventListener("samples", (event) => store.handleSamplesEvent(event.data));
  source.addEventListener("alerts", (event) => {
    const body = JSON.parse(event.data) as { alerts?: unknown[] };
    if (Array.isArray(body.alerts)) client.setQueryData(ALERTS_KEY, body.alerts);
  });
  source.addEventListener("incidents", (event) => {
    const body = JSON.parse(event.data) as { incidents?: unknown[] };
    if (Array.isArray(body.incidents)) client.setQueryData(INCIDENTS_KEY, body.incidents);
  });
}

function useStream(store: LiveStore, client: QueryClient, create: EventSourceFactory, debounceMs: number) {
  useEffect(() => {
    let source: EventSourceLike | null = null;
    let url = "";
    let timer: ReturnType<typeof setTimeout> | undefined;
    const open = (force = false) => {
      const next = liveUrl(store.wantedGpus());
      if (source && next === url && !force) return;
      source?.close();
      url = next;
      const mine = (source = create(next));
      mine.onopen = () => store.setConnectionState("live");
      mine.onerror = () => {
        if (mine !== source) return;
        const closed = mine.readyState === CLOSED;
        store.setConnectionState(closed ? "offline" : "reconnecting");
        if (closed) timer = setTimeout(() => open(true), RETRY_CLOSED_MS);
      };
      listen(mine, store, client);
    };
    open();
    const off = store.onWantedChange(() => {
      clearTimeout(timer);
      timer = setTimeout(open, debounceMs);
    });
    return () => {
      off();
      clearTimeout(timer);
      source?.close();
      source = null;
    };
  }, [store, client, create, debounceMs]);
}

export function LiveProvider({
  children,
  createEventSource = browserEventSource,
  debounceMs = 150,
  store: given,
}: {
  children: ReactNode;
  createEventSource?: EventSourceFactory;
  debounceMs?: number;
  store?: LiveStore;
}) {
  const [store] = useState(() => given ?? new LiveStore());
  useStream(store, useQueryClient(), createEventSource, debounceMs);
  return <LiveContext.Provider value={store}>{children}</LiveContext.Provider>;
}

/** The live store, or null outside a LiveProvider (pages then show REST data only). */
export function useLiveStore(): LiveStore | null {
  return useContext(LiveContext);
}

/** Shows these GPUs' series while mounted: they join the stream's `gpus`. */
export function useLiveGpus(gpus: readonly string[]): LiveStore | null {
  const store = useLiveStore();
  const key = [...new Set(gpus)].sort().join(",");
  useEffect(() => (store && key ? store.want(key.split(",")) : undefined), [store, key]);
  return store;
}

/** One GPU's live series: its buffer and a subscription (null outside a LiveProvider). */
export function useGpuSeries(gpu: string) {
  const store = useLiveGpus([gpu]);
  return useMemo(
    () => (store ? { buffer: store.buffer(gpu), subscribe: (l: () => void) => store.subscribe(gpu, l), store } : null),
    [store, gpu],
  );
}

const never = () => () => undefined;

/** The stream's state for the badge; "offline" outside a provider. */
export function useConnectionState(): ConnectionState {
  const store = useLiveStore();
  return useSyncExternalStore(
    store ? (l) => store.onConnectionState(l) : never,
    () => (store ? store.connectionState() : "offline"),
  );
}
