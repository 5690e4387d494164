// One typed client per service, all on the gateway's origin: /api/<service>/... The gateway adds the
// caller's API key from the session cookie; unsafe methods carry the CSRF token it issued at login.
import createClient, { type Middleware } from "openapi-fetch";
import type { paths as AlertingPaths } from "./gen/alerting";
import type { paths as BillingPaths } from "./gen/billing";
import type { paths as InventoryPaths } from "./gen/inventory";
import type { paths as RecoveryPaths } from "./gen/recovery";
import type { paths as SchedulerPaths } from "./gen/scheduler";
import type { paths as TelemetryPaths } from "./gen/telemetry";

export const CSRF_COOKIE = "gpucloud_csrf";
export const CSRF_HEADER = "X-CSRF-Token";
const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** The services' one error shape: {"error": {status, code, message, field, details}}. */
export interface ApiProblem {
  status: number;
  code: string;
  message: string;
  field?: string | null;
  details?: unknown;
}

/** A refused or failed call, carrying the message and the field the service named. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | null;
  readonly details: unknown;

  constructor(problem: ApiProblem) {
    super(problem.message);
    this.name = "ApiError";
    this.status = problem.status;
    this.code = problem.code;
    this.field = problem.field ?? null;
    this.details = problem.details;
  }
}

export function readCookie(name: string, cookies: string = document.cookie): string | null {
  for (const part of cookies.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return null;
}

/** Turns any non-2xx response into an ApiError (whatever its body), so callers only see data or a throw. */
export async function problemOf(response: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await response.clone().json();
  } catch {
    // not JSON: a proxy or the gateway itself answered
  }
  const error = (body as { error?: Partial<ApiProblem> } | null)?.error;
  return new ApiError({
    status: response.status,
    code: error?.code ?? `http_${response.status}`,
    message: error?.message ?? (response.statusText || `request failed with ${response.status}`),
    field: error?.field ?? null,
    details: error?.details,
  });
}

/** Listeners told when any call answers 401, so the app can return to the login page. */
const unauthorized = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorized.add(listener);
  return () => unauthorized.delete(listener);
}

const session: Middleware = {
  onRequest({ request }) {
    if (UNSAFE.has(request.method)) {
      const token = readCookie(CSRF_COOKIE);
      if (token) request.headers.set(CSRF_HEADER, token);
    }
    return request;
  },
  async onResponse({ response }) {
    if (response.ok) return response;
    if (response.status === 401) unauthorized.forEach((listener) => listener());
    throw await problemOf(response);
  },
};

function serviceClient<Paths extends {}>(service: string) {
  const client = createClient<Paths>({
    baseUrl: `${window.location.origin}/api/${service}`,
    credentials: "same-origin",
    // Looked up at each call, not at import, so tests (and the e2e timing hooks) can wrap it.
    fetch: (request) => globalThis.fetch(request),
  });
  client.use(session);
  return client;
}

export const api = {
  inventory: serviceClient<InventoryPaths>("inventory"),
  scheduler: serviceClient<SchedulerPaths>("scheduler"),
  telemetry: serviceClient<TelemetryPaths>("telemetry"),
  alerting: serviceClient<AlertingPaths>("alerting"),
  billing: serviceClient<BillingPaths>("billing"),
  recovery: serviceClient<RecoveryPaths>("recovery"),
};

/** Unwraps openapi-fetch's {data, error}: the middleware has already thrown on errors. */
export async function data<T>(call: Promise<{ data?: T; error?: unknown }>): Promise<T> {
  const { data: body } = await call;
  return body as T;
}

/** A gateway call outside the six services (session, live stream). */
export async function gateway<T>(path: string, init: RequestInit = {}): Promise<T> {
  const method = (init.method ?? "GET").toUpperCase();
  const headers = new Headers(init.headers);
  if (init.body && !headers.has("Content-Type")) headers.set("Content-Type", "application/json");
  if (UNSAFE.has(method)) {
    const token = readCookie(CSRF_COOKIE);
    if (token) headers.set(CSRF_HEADER, token);
  }
  const response = await fetch(`/api/${path}`, { ...init, method, headers, credentials: "same-origin" });
  if (!response.ok) throw await problemOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}
