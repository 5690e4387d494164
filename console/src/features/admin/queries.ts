// Admin data (admin keys only): tenants, key issue/revoke, and each tenant's fair-share weight and quota.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components } from "../../api/gen/scheduler";

export type Tenant = components["schemas"]["TenantOut"];
export type IssuedKey = components["schemas"]["IssuedKeyOut"];
export type Share = components["schemas"]["ShareOut"];
export type Quota = components["schemas"]["QuotaOut"];
export type QuotaLimits = components["schemas"]["QuotaIn"];

const tenant = (tenantId: string) => ({ params: { path: { tenant_id: tenantId } } });

export function useTenants() {
  return useQuery({
    queryKey: ["scheduler", "/v1/admin/tenants", {}],
    queryFn: () => data(api.scheduler.GET("/v1/admin/tenants")),
  });
}

export function useShare(tenantId: string) {
  return useQuery({
    queryKey: ["scheduler", "/v1/admin/tenants/{tenant_id}/share", { tenantId }],
    queryFn: () => data(api.scheduler.GET("/v1/admin/tenants/{tenant_id}/share", tenant(tenantId))),
  });
}

export function useQuota(tenantId: string) {
  return useQuery({
    queryKey: ["scheduler", "/v1/admin/tenants/{tenant_id}/quota", { tenantId }],
    queryFn: () => data(api.scheduler.GET("/v1/admin/tenants/{tenant_id}/quota", tenant(tenantId))),
  });
}

export function useCreateTenant() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { tenant_id: string; name: string }) => data(api.scheduler.POST("/v1/admin/tenants", { body })),
    onSuccess: () => client.invalidateQueries({ queryKey: ["scheduler", "/v1/admin/tenants"] }),
  });
}

export function useIssueKey() {
  return useMutation({
    mutationFn: (tenantId: string) => data(api.scheduler.POST("/v1/admin/tenants/{tenant_id}/keys", tenant(tenantId))),
  });
}

export function useRevokeKey() {
  return useMutation({
    mutationFn: (keyId: string) =>
      data(api.scheduler.DELETE("/v1/admin/keys/{key_id}", { params: { path: { key_id: keyId } } })),
  });
}

export function usePutShare(tenantId: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (shares: number) =>
      data(api.scheduler.PUT("/v1/admin/tenants/{tenant_id}/share", { ...tenant(tenantId), body: { shares } })),
    onSuccess: (share) => client.setQueryData(["scheduler", "/v1/admin/tenants/{tenant_id}/share", { tenantId }], share),
  });
}

export function usePutQuota(tenantId: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (limits: QuotaLimits) =>
      data(api.scheduler.PUT("/v1/admin/tenants/{tenant_id}/quota", { ...tenant(tenantId), body: limits })),
    onSuccess: (quota) => client.setQueryData(["scheduler", "/v1/admin/tenants/{tenant_id}/quota", { tenantId }], quota),
  });
}
