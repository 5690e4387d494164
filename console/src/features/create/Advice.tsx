// What the wizard advises beside the resources: the recommended GPU with its reasons, predicted time, price, queue place.
import { Button, List, Loader, NumberInput, Paper, Select, Stack, Text, Title } from "@mantine/core";
import { ErrorAlert } from "../../components/QueryStatus";
import { formatMicro } from "../../components/money";
import type { Prediction, QueuePreview, Recommendation } from "./queries";
import { formatDuration, type HourPrice } from "./resources";
import { fixed } from "../../components/number";

interface Result<T> {
  data?: T;
  isPending: boolean;
  error: unknown;
  fetchStatus?: string;
}

function Pending({ query, label }: { query: Result<unknown>; label: string }) {
  if (query.error) return <ErrorAlert error={query.error} title={`No ${label}`} />;
  if (query.isPending && query.fetchStatus !== "idle") return <Loader size="sm" aria-label={`Loading ${label}`} />;
  return null;
}

export function RecommendationCard(props: {
  query: Result<Recommendation>;
  mode: "training" | "inference";
  onMode: (mode: "training" | "inference") => void;
  sizeB: number | undefined;
  onSize: (size: number | undefined) => void;
  onUse: (model: string, count: number) => void;
}) {
  const { query, mode, onMode, sizeB, onSize, onUse } = props;
  const rec = query.data;
  return (
    <Paper withBorder p="md" component="section" aria-label="GPU recommendation">
      <Stack gap="xs">
        <Title order={3}>GPU recommendation</Title>
        <Select
          label="Use"
          data={[
            { value: "training", label: "Training" },
            { value: "inference", label: "Inference" },
          ]}
          value={mode}
          onChange={(value) => onMode((value as "training" | "inference") ?? "training")}
          allowDeselect={false}
        />
        <NumberInput
          hideControls
          label="Model size (billions of parameters)"
          placeholder="e.g. 7"
          min={0.001}
          value={sizeB ?? ""}
          onChange={(value) => onSize(value === "" ? undefined : Number(value))}
        />
        <Pending query={query} label="recommendation" />
        {rec ? (
          <>
            <Text>
              {rec.model ? (
                <>
                  Recommended: <strong>{`${rec.count} × ${rec.model}`}</strong> (needs about {rec.memory_need_gb} GB)
                </>
              ) : (
                "No GPU model in the fleet fits this need."
              )}
            </Text>
            <List size="sm" aria-label="Reasons for the recommendation">
              {rec.reasons.map((reason) => (
                <List.Item key={reason}>{reason}</List.Item>
              ))}
            </List>
            {rec.history_too_thin ? <Text size="sm">Your history is too thin to back this with past jobs.</Text> : null}
            {rec.model ? (
              <Button size="md" mih={44} variant="light" onClick={() => onUse(rec.model as string, rec.count)}>
                Use the recommendation
              </Button>
            ) : null}
          </>
        ) : null}
      </Stack>
    </Paper>
  );
}

export function PredictionText({ query }: { query: Result<Prediction> }) {
  const p = query.data;
  if (!p) return <Pending query={query} label="prediction" />;
  if (p.p50_s === null) return <Text>Predicted training time: not enough history ({p.samples} similar jobs).</Text>;
  return (
    <Text>
      Predicted training time: about {formatDuration(p.p50_s)} (90% within {formatDuration(p.p90_s)}), from {p.samples}{" "}
      similar jobs.
    </Text>
  );
}

export function PriceText({ price }: { price: HourPrice | null }) {
  if (!price) return <Text>Price per hour: no listed on-demand price applies to this request.</Text>;
  return (
    <Text>
      Price per hour: <strong>{formatMicro(price.micro)}</strong> ({price.detail})
    </Text>
  );
}

export function QueueText({ query }: { query: Result<QueuePreview> }) {
  const q = query.data;
  if (!q) {
    if (query.error) return <ErrorAlert error={query.error} title="Queue position unknown" />;
    return <Pending query={query} label="queue position" />;
  }
  return (
    <Stack gap={2}>
      <Text>
        Queue position it would get: <strong>{q.position}</strong> ({q.ahead} ahead, {q.same_model_ahead} of them for the
        same GPU model; priority {q.priority}, {fixed(q.priority_value, 3)})
      </Text>
      <Text size="sm">{q.explanation}</Text>
    </Stack>
  );
}
