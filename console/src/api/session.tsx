// The browser session: POST /api/session turns an API key into an HttpOnly cookie at the gateway.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { createContext, useContext, useEffect, type ReactNode } from "react";
import { ApiError, gateway, onUnauthorized } from "./client";

export interface Session {
  tenant_id: string | null;
  role: "tenant" | "admin";
  key_id: string;
  csrf_token: string;
  expires_at: string;
}

const SESSION_KEY = ["session"] as const;
const SessionContext = createContext<Session | null>(null);

export async function login(apiKey: string): Promise<Session> {
  return gateway<Session>("session", { method: "POST", body: JSON.stringify({ api_key: apiKey }) });
}

export async function logout(): Promise<void> {
  await gateway<void>("session", { method: "DELETE" });
}

async function current(): Promise<Session | null> {
  try {
    return await gateway<Session>("session");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

export function useSessionQuery() {
  const client = useQueryClient();
  useEffect(() => onUnauthorized(() => client.setQueryData(SESSION_KEY, null)), [client]);
  return useQuery({ queryKey: SESSION_KEY, queryFn: current, staleTime: Infinity, retry: false });
}

export function useSetSession() {
  const client = useQueryClient();
  return (session: Session | null) => {
    client.setQueryData(SESSION_KEY, session);
    if (session === null) client.removeQueries({ predicate: (q) => q.queryKey[0] !== "session" });
  };
}

export function SessionProvider({ session, children }: { session: Session; children: ReactNode }) {
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}

/** The signed-in caller; only inside the signed-in part of the app. */
export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error("useSession outside a signed-in page");
  return session;
}
