// Query keys shared by the pages' REST hooks and the live stream, so a live event lands where a page reads.

/** alerting GET /v1/alerts (the caller's firing alerts), unfiltered. */
export const ALERTS_KEY = ["alerting", "/v1/alerts", { state: "all" }] as const;
/** recovery GET /v1/incidents, unfiltered. */
export const INCIDENTS_KEY = ["recovery", "/v1/incidents", {}] as const;
