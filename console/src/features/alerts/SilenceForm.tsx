// A new silence: matchers (name, op, value), start and end (or a duration), comment. The service names the
// field it refuses (matchers.0.value, ends_at, comment...) and the message shows at that input.
import { Alert, Button, Group, Select, Stack, Text, TextInput, Textarea } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { ApiError } from "../../api/client";
import { errorMessage } from "../../components/QueryStatus";
import { TOUCH_INPUT } from "../../components/touch";
import { parseDuration } from "./durations";
import type { Matcher, MatchOp } from "./matchers";
import type { SilenceIn } from "./queries";

const OPS: MatchOp[] = ["=", "!=", "=~", "!~"];

interface Draft {
  matchers: Matcher[];
  startsAt: string;
  endsAt: string;
  duration: string;
  comment: string;
}

const EMPTY: Draft = { matchers: [{ name: "alertname", op: "=", value: "" }], startsAt: "", endsAt: "", duration: "2h", comment: "" };

/** The request body, or the field and message of what is wrong before asking. */
export function silenceBody(draft: Draft, now: Date = new Date()): SilenceIn | { field: string; message: string } {
  const starts = draft.startsAt ? new Date(draft.startsAt) : null;
  if (starts && Number.isNaN(starts.getTime())) return { field: "starts_at", message: "starts_at: not a date and time" };
  let ends: Date;
  if (draft.endsAt) {
    ends = new Date(draft.endsAt);
    if (Number.isNaN(ends.getTime())) return { field: "ends_at", message: "ends_at: not a date and time" };
  } else {
    const seconds = parseDuration(draft.duration);
    if (seconds === null || seconds <= 0) return { field: "duration", message: "duration: give e.g. 30m, 2h or 1d, or an end time" };
    ends = new Date((starts ?? now).getTime() + seconds * 1000);
  }
  const body: SilenceIn = { matchers: draft.matchers, ends_at: ends.toISOString(), comment: draft.comment };
  if (starts) body.starts_at = starts.toISOString();
  return body;
}

export function SilenceForm({
  createdBy,
  onSubmit,
  busy,
}: {
  createdBy: string;
  onSubmit: (body: SilenceIn) => Promise<unknown>;
  busy: boolean;
}) {
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [error, setError] = useState<{ field: string | null; message: string } | null>(null);
  const at = (field: string) => (error?.field === field ? error.message : undefined);
  const setMatcher = (i: number, change: Partial<Matcher>) =>
    setDraft((d) => ({ ...d, matchers: d.matchers.map((m, k) => (k === i ? { ...m, ...change } : m)) }));

  async function submit(event: FormEvent) {
    event.preventDefault();
    setError(null);
    const body = silenceBody(draft);
    if ("field" in body) return setError(body);
    try {
      await onSubmit(body);
      setDraft(EMPTY);
    } catch (e) {
      const field = e instanceof ApiError ? e.field : null;
      setError({ field: field === "ends_at" && !draft.endsAt ? "duration" : field, message: errorMessage(e) });
    }
  }

  const known = new Set(["starts_at", "ends_at", "duration", "comment", ...draft.matchers.flatMap((_, i) => ["name", "op", "value"].map((p) => `matchers.${i}.${p}`))]);
  return (
    <Stack component="form" onSubmit={submit} gap="sm" aria-label="New silence">
      {draft.matchers.map((m, i) => (
        <Group key={i} align="flex-start" gap="xs" wrap="wrap">
          <TextInput styles={TOUCH_INPUT} label={`Matcher ${i + 1} label`} value={m.name} onChange={(e) => setMatcher(i, { name: e.currentTarget.value })} error={at(`matchers.${i}.name`)} required />
          <Select styles={TOUCH_INPUT}
            label={`Matcher ${i + 1} operator`}
            data={OPS}
            value={m.op}
            onChange={(op) => setMatcher(i, { op: (op ?? "=") as MatchOp })}
            allowDeselect={false}
            error={at(`matchers.${i}.op`)}
            w={110}
          />
          <TextInput styles={TOUCH_INPUT} label={`Matcher ${i + 1} value`} value={m.value} onChange={(e) => setMatcher(i, { value: e.currentTarget.value })} error={at(`matchers.${i}.value`)} />
          {draft.matchers.length > 1 ? (
            <Button variant="default" mt={24} mih={44} onClick={() => setDraft((d) => ({ ...d, matchers: d.matchers.filter((_, k) => k !== i) }))}>
              Remove matcher {i + 1}
            </Button>
          ) : null}
        </Group>
      ))}
      <Group>
        <Button variant="default" mih={44} onClick={() => setDraft((d) => ({ ...d, matchers: [...d.matchers, { name: "", op: "=", value: "" }] }))}>
          Add matcher
        </Button>
      </Group>
      <Group align="flex-start" wrap="wrap">
        <TextInput styles={TOUCH_INPUT} type="datetime-local" label="Starts at" description="Empty: now" value={draft.startsAt} onChange={(e) => setDraft({ ...draft, startsAt: e.currentTarget.value })} error={at("starts_at")} />
        <TextInput styles={TOUCH_INPUT} label="Duration" description="e.g. 30m, 2h, 1d" value={draft.duration} onChange={(e) => setDraft({ ...draft, duration: e.currentTarget.value })} error={at("duration")} disabled={draft.endsAt !== ""} />
        <TextInput styles={TOUCH_INPUT} type="datetime-local" label="Ends at" description="Instead of a duration" value={draft.endsAt} onChange={(e) => setDraft({ ...draft, endsAt: e.currentTarget.value })} error={at("ends_at")} />
      </Group>
      <Textarea styles={TOUCH_INPUT} label="Comment" value={draft.comment} onChange={(e) => setDraft({ ...draft, comment: e.currentTarget.value })} error={at("comment")} required autosize minRows={2} />
      <Text size="sm">Created by: {createdBy} (the service records the key that creates the silence)</Text>
      {error && !known.has(error.field ?? "") ? (
        <Alert color="red" role="alert" title="Silence refused">
          {error.message}
        </Alert>
      ) : null}
      <Group>
        <Button type="submit" loading={busy} size="md" mih={44}>
          Create silence
        </Button>
      </Group>
    </Stack>
  );
}
