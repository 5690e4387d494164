import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { seriousViolations } from "../../test/axe";
import { ADMIN, fakeFetch, renderPage, TENANT } from "../../test/render";
import AdminPage from "./AdminPage";

afterEach(() => vi.unstubAllGlobals());

const TENANTS = [
  { tenant_id: "acme", name: "Acme Corp", created_at: "2026-11-01T00:00:00Z" },
  { tenant_id: "globex", name: "Globex", created_at: "2026-11-02T00:00:00Z" },
];
const SHARE = { tenant_id: "acme", shares: 2, total_shares: 4, share_fraction: 0.5, decayed_usage_unit_hours: 10, entitlement_unit_hours: 50, fair_share: 0.2 };
const QUOTA = { tenant_id: "acme", limits: { gpus: 8, units: null, workloads: 20 }, usage: { gpus: 3, units: 24, workloads: 2 } };

function routes() {
  return fakeFetch({
    "GET /scheduler/v1/admin/tenants": () => TENANTS,
    "POST /scheduler/v1/admin/tenants/acme/keys": () => ({ key_id: "k-9", tenant_id: "acme", role: "tenant", api_key: "gck_secret_value_123" }),
    "POST /scheduler/v1/admin/tenants": () => ({
      tenant: { tenant_id: "initech", name: "Initech", created_at: "2026-12-03T00:00:00Z" },
      key: { key_id: "k-10", tenant_id: "initech", role: "tenant", api_key: "gck_first_key" },
    }),
    "DELETE /scheduler/v1/admin/keys/k-3": () => new Response(null, { status: 204 }),
    "GET /scheduler/v1/admin/tenants/acme/share": () => SHARE,
    "GET /scheduler/v1/admin/tenants/acme/quota": () => QUOTA,
    "PUT /scheduler/v1/admin/tenants/acme/share": () => ({ ...SHARE, shares: 3 }),
    "PUT /scheduler/v1/admin/tenants/acme/quota": () =>
      new Response(JSON.stringify({ error: { status: 422, code: "validation_error", message: "gpus: must be at most 100000", field: "gpus" } }), { status: 422 }),
  });
}

describe("the admin page", () => {
  it("refuses a tenant session and calls no admin API", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<AdminPage />, { session: TENANT, path: "/admin" });
    expect(screen.getByRole("heading", { level: 1, name: "This page needs an admin key" })).toBeInTheDocument();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(fake.calls.filter((c) => c.path.includes("/admin"))).toEqual([]);
    expect(await seriousViolations()).toEqual([]);
  });

  it("lists tenants and shows an issued key's secret once with a copy button", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<AdminPage />, { session: ADMIN, path: "/admin" });

    const table = await screen.findByRole("table", { name: "Tenants" });
    expect(within(table).getByText("Acme Corp")).toBeInTheDocument();
    await userEvent.click(within(table).getByRole("button", { name: "Issue key for acme" }));
    expect(await screen.findByText("gck_secret_value_123")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Copy" })).toBeInTheDocument();
    expect(await seriousViolations()).toEqual([]);
    expect(fake.calls.some((c) => c.method === "POST" && c.path === "/scheduler/v1/admin/tenants/acme/keys")).toBe(true);
  });

  it("creates a tenant with the typed body and shows its first key", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<AdminPage />, { session: ADMIN, path: "/admin" });
    await userEvent.type(await screen.findByRole("textbox", { name: /Tenant ID/ }), "initech");
    await userEvent.type(screen.getByRole("textbox", { name: /^Name/ }), "Initech");
    await userEvent.click(screen.getByRole("button", { name: "Create tenant" }));
    expect(await screen.findByText("gck_first_key")).toBeInTheDocument();
    expect(fake.calls.find((c) => c.method === "POST" && c.path === "/scheduler/v1/admin/tenants")?.body).toEqual({ tenant_id: "initech", name: "Initech" });
  });

  it("revokes a key after confirming", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<AdminPage />, { session: ADMIN, path: "/admin" });
    await userEvent.type(await screen.findByRole("textbox", { name: /Key ID/ }), "k-3");
    await userEvent.click(screen.getByRole("button", { name: "Revoke key" }));
    const dialog = await screen.findByRole("dialog", { name: "Revoke key k-3?" });
    await userEvent.click(within(dialog).getByRole("button", { name: "Revoke" }));
    expect(await screen.findByText(/Key k-3 is revoked/)).toBeInTheDocument();
    expect(fake.calls.some((c) => c.method === "DELETE" && c.path === "/scheduler/v1/admin/keys/k-3")).toBe(true);
  });

  it("shows shares and quota, saves shares, and puts a quota refusal at its field", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<AdminPage />, { session: ADMIN, path: "/admin" });
    await userEvent.click(await screen.findByRole("button", { name: "Shares and quota of acme" }));
    expect(await screen.findByText(/2 of 4 shares \(50.0%\)/)).toBeInTheDocument();
    expect(screen.getByRole("table", { name: "Quota usage of acme" })).toHaveTextContent("unlimited");
    expect(await seriousViolations()).toEqual([]);

    const shares = screen.getByRole("textbox", { name: /^Shares/ });
    await userEvent.clear(shares);
    await userEvent.type(shares, "3");
    await userEvent.click(screen.getByRole("button", { name: "Save shares" }));
    await waitFor(() => expect(fake.calls.find((c) => c.method === "PUT" && c.path.endsWith("/share"))?.body).toEqual({ shares: 3 }));

    const gpus = screen.getByRole("textbox", { name: /Whole GPUs limit/ });
    await userEvent.clear(gpus);
    await userEvent.type(gpus, "999999");
    await userEvent.click(screen.getByRole("button", { name: "Save quota" }));
    await waitFor(() => expect(gpus).toHaveAccessibleDescription(/must be at most 100000/));
    expect(fake.calls.find((c) => c.method === "PUT" && c.path.endsWith("/quota"))?.body).toEqual({ gpus: 999999, units: null, workloads: 20 });
  });
});
