// The stream's state, small and in words (color is not the only signal).
import { Badge } from "@mantine/core";
import { useConnectionState } from "./LiveProvider";
import type { ConnectionState } from "./store";

const LOOK: Record<ConnectionState, { color: string; text: string }> = {
  connecting: { color: "gray", text: "connecting" },
  live: { color: "green", text: "live" },
  reconnecting: { color: "yellow", text: "reconnecting" },
  offline: { color: "red", text: "offline" },
};

export function LiveBadge() {
  const state = useConnectionState();
  const look = LOOK[state];
  return (
    <Badge color={look.color} variant="dot" role="status" aria-label={`Live data: ${look.text}`}>
      {look.text}
    </Badge>
  );
}
