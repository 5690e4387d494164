// The review step: everything the draft holds, what it costs and where it would queue, and the submit button.
import { Alert, Button, Paper, Stack, Table, Text, Title } from "@mantine/core";
import type { ReactNode } from "react";
import { Link } from "react-router-dom";
import { ErrorAlert } from "../../components/QueryStatus";
import type { NetworkForm, ImageForm } from "./StepForms";
import { describeResources, type ResourceForm } from "./resources";

export function ReviewStep(props: {
  image: ImageForm;
  resources: ResourceForm;
  network: NetworkForm;
  advice: ReactNode;
  submitting: boolean;
  error: unknown;
  onSubmit: () => void;
}) {
  const { image, resources, network, advice, submitting, error, onSubmit } = props;
  const rows: [string, string][] = [
    ["Image", `${image.name}:${image.version}`],
    ["Kind", image.kind],
    ["Priority", image.priority],
    ["Resources", describeResources(resources)],
    ["VPC", network.vpc_id],
    ["Subnet", network.subnet_id],
    ["Security group", network.security_group_id],
    ["Public IP", network.public_ip ? "yes" : "no"],
  ];
  return (
    <Stack>
      <Title order={2}>Review</Title>
      <Table aria-label="What will be created" withRowBorders>
        <Table.Tbody>
          {rows.map(([name, value]) => (
            <Table.Tr key={name}>
              <Table.Th scope="row">{name}</Table.Th>
              <Table.Td>{value}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      <Paper withBorder p="md">
        <Stack gap="xs">{advice}</Stack>
      </Paper>
      <ErrorAlert error={error} title="Submission refused" />
      <Button size="md" mih={44} onClick={onSubmit} loading={submitting}>
        Submit
      </Button>
    </Stack>
  );
}

export function Submitted({ workloadId }: { workloadId: string }) {
  return (
    <Alert color="blue" title="Submitted" role="status">
      <Stack gap="xs" align="flex-start">
        <Text>
          Workload <strong>{workloadId}</strong> was submitted.
        </Text>
        <Button component={Link} to="/workloads" size="md" mih={44} variant="light">
          See it in Workloads
        </Button>
      </Stack>
    </Alert>
  );
}
