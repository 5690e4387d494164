// What the service read in the text, what it did not understand, and the draft steps it filled.
import { Badge, Group, List, Paper, Stack, Table, Text, Title } from "@mantine/core";
import type { Described } from "./queries";

const STEPS = ["image", "resources", "network"] as const;

function show(value: unknown): string {
  if (value === null || value === undefined) return "not filled";
  if (typeof value !== "object") return String(value);
  return Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join(", ");
}

export function ReadingList({ described }: { described: Described }) {
  return (
    <Paper withBorder p="md" component="section" aria-label="How it read your text">
      <Stack gap="xs">
        <Title order={2}>How it read your text</Title>
        {described.reading.length === 0 ? <Text>It matched nothing it knows.</Text> : null}
        <List spacing="xs" aria-label="Reading">
          {described.reading.map((r) => (
            <List.Item key={`${r.phrase}:${r.meaning}`}>
              <Text span fw={600}>
                “{r.phrase}”
              </Text>{" "}
              → {r.meaning}
            </List.Item>
          ))}
        </List>
        <Notes notes={described.notes} />
      </Stack>
    </Paper>
  );
}

export function Notes({ notes }: { notes: string[] }) {
  if (notes.length === 0) return null;
  return (
    <List size="sm" aria-label="Notes">
      {notes.map((note) => (
        <List.Item key={note}>{note}</List.Item>
      ))}
    </List>
  );
}

export function NotUnderstood({ words }: { words: string[] }) {
  return (
    <Paper withBorder p="md" component="section" aria-label="Not understood">
      <Stack gap="xs">
        <Title order={2}>Not understood</Title>
        {words.length === 0 ? (
          <Text>Everything was understood.</Text>
        ) : (
          <Text>
            Not understood: {words.map((w) => `“${w}”`).join(", ")}. Say it another way or set it in the wizard.
          </Text>
        )}
      </Stack>
    </Paper>
  );
}

export function DraftSteps({ described }: { described: Described }) {
  const steps = described.draft.steps as Record<string, unknown>;
  return (
    <Paper withBorder p="md" component="section" aria-label="The draft it filled">
      <Stack gap="xs">
        <Title order={2}>The draft it filled</Title>
        <Table aria-label="Draft steps">
          <Table.Tbody>
            {STEPS.map((step) => (
              <Table.Tr key={step}>
                <Table.Th scope="row">{step}</Table.Th>
                <Table.Td>
                  <Group gap="xs" wrap="wrap">
                    <Badge color={described.draft.missing.includes(step) ? "gray" : "green"} variant="dot">
                      {described.draft.missing.includes(step) ? "missing" : "filled"}
                    </Badge>
                    <Text size="sm">{show(steps[step])}</Text>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Stack>
    </Paper>
  );
}
