import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, data, gateway, readCookie } from "./client";

afterEach(() => vi.unstubAllGlobals());

describe("the API layer", () => {
  it("sends unsafe methods with the CSRF token from its cookie and the session cookie", async () => {
    document.cookie = "gpucloud_csrf=tok-123";
    const seen: Request[] = [];
    vi.stubGlobal("fetch", async (request: Request) => {
      seen.push(request);
      return new Response(JSON.stringify({ ok: true }), { status: 200, headers: { "Content-Type": "application/json" } });
    });
    await data(api.alerting.DELETE("/v1/silences/{silence_id}", { params: { path: { silence_id: "s-1" } } }));
    expect(seen[0].url).toContain("/api/alerting/v1/silences/s-1");
    expect(seen[0].headers.get("X-CSRF-Token")).toBe("tok-123");
    expect(seen[0].credentials).toBe("same-origin");
  });

  it("turns the services' error body into an ApiError naming the field", async () => {
    const problem = { error: { status: 422, code: "unprocessable", message: "count must be at least 1", field: "gpu_count" } };
    vi.stubGlobal("fetch", async () => new Response(JSON.stringify(problem), { status: 422 }));
    const failure = await gateway("scheduler/v1/workloads", { method: "POST", body: "{}" }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ApiError);
    expect((failure as ApiError).field).toBe("gpu_count");
    expect((failure as ApiError).message).toBe("count must be at least 1");
  });

  it("reads a non-JSON refusal as an error of its status", async () => {
    vi.stubGlobal("fetch", async () => new Response("Bad Gateway", { status: 502, statusText: "Bad Gateway" }));
    const failure = await data(api.inventory.GET("/v1/capacity")).catch((e: unknown) => e);
    expect((failure as ApiError).status).toBe(502);
    expect((failure as ApiError).code).toBe("http_502");
  });

  it("reads one cookie among several", () => {
    expect(readCookie("b", "a=1; b=x%3Dy; c=3")).toBe("x=y");
    expect(readCookie("z", "a=1")).toBeNull();
  });
});
