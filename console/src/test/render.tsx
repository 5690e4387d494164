// Renders a page as the app does (Mantine, TanStack Query, router, a session), for component tests.
import { render } from "@testing-library/react";
import type { ReactElement } from "react";
import { MemoryRouter } from "react-router-dom";
import { SessionProvider, type Session } from "../api/session";
import { makeQueryClient, Providers } from "../app/Providers";

export const TENANT: Session = {
  tenant_id: "acme",
  role: "tenant",
  key_id: "k-1",
  csrf_token: "t",
  expires_at: "2030-01-01T00:00:00Z",
};
export const ADMIN: Session = { ...TENANT, tenant_id: null, role: "admin" };

export function renderPage(ui: ReactElement, { session = TENANT, path = "/" }: { session?: Session; path?: string } = {}) {
  const client = makeQueryClient();
  client.setDefaultOptions({ queries: { retry: false, staleTime: Infinity } });
  return render(
    <Providers client={client}>
      <MemoryRouter initialEntries={[path]}>
        <SessionProvider session={session}>{ui}</SessionProvider>
      </MemoryRouter>
    </Providers>,
  );
}

/** A fetch stand-in answering by method and path (after /api), recording each call. */
export function fakeFetch(routes: Record<string, (init: RequestInit, url: URL) => unknown>) {
  const calls: { method: string; path: string; body: unknown }[] = [];
  const fn = async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const request = input instanceof Request ? input : new Request(new URL(String(input), window.location.origin), init);
    const url = new URL(request.url, window.location.origin);
    const path = url.pathname.replace(/^\/api/, "");
    const text = request.method === "GET" ? "" : await request.clone().text();
    calls.push({ method: request.method, path, body: text ? JSON.parse(text) : null });
    const handler = routes[`${request.method} ${path}`];
    if (!handler) return new Response(JSON.stringify({ error: { status: 404, code: "not_found", message: `no route ${path}` } }), { status: 404 });
    const result = handler(init, url);
    if (result instanceof Response) return result;
    return new Response(JSON.stringify(result), { status: 200, headers: { "Content-Type": "application/json" } });
  };
  return { fn: fn as typeof fetch, calls };
}
