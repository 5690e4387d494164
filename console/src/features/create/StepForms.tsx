// The wizard's three forms; each shows the service's message at the field it named (`errors[field]`).
import { Checkbox, NumberInput, SegmentedControl, Select, Stack, Text, TextInput } from "@mantine/core";
import { PRIORITY_CLASSES } from "./preview";
import type { Catalog, Image, PriorityClass } from "./queries";
import type { ResourceForm, ResourceKind } from "./resources";

export type FieldErrors = Record<string, string>;

export interface ImageForm {
  name: string;
  version: string;
  kind: "instance" | "job";
  priority: PriorityClass;
}
export const EMPTY_IMAGE: ImageForm = { name: "", version: "", kind: "instance", priority: "normal" };

export function ImageStepForm(props: {
  images: Image[];
  value: ImageForm;
  onChange: (value: ImageForm) => void;
  errors: FieldErrors;
  optionsLocked: boolean;
}) {
  const { images, value, onChange, errors, optionsLocked } = props;
  const image = images.find((i) => i.name === value.name);
  return (
    <Stack>
      <Select
        label="Image"
        placeholder="Pick an image"
        data={images.map((i) => ({ value: i.name, label: `${i.name} (${i.framework})` }))}
        value={value.name || null}
        onChange={(name) => onChange({ ...value, name: name ?? "", version: "" })}
        error={errors["image.name"] ?? errors.image}
        allowDeselect={false}
        required
      />
      <Select
        label="Version"
        placeholder={image ? "Pick a version" : "Pick an image first"}
        data={image?.versions ?? []}
        value={value.version || null}
        onChange={(version) => onChange({ ...value, version: version ?? "" })}
        error={errors["image.version"]}
        disabled={!image}
        allowDeselect={false}
        required
      />
      <Select
        label="Kind"
        description={optionsLocked ? "Set when the draft was opened" : "An instance runs until stopped; a job finishes on its own"}
        data={[
          { value: "instance", label: "Instance" },
          { value: "job", label: "Training job" },
        ]}
        value={value.kind}
        onChange={(kind) => onChange({ ...value, kind: (kind as ImageForm["kind"]) ?? "instance" })}
        error={errors["options.kind"] ?? errors.kind}
        disabled={optionsLocked}
        allowDeselect={false}
      />
      <Select
        label="Priority"
        description="priority = min(0.6 × urgency + 0.4 × (1 − your fair share), 1.0)"
        data={Object.entries(PRIORITY_CLASSES).map(([name, c]) => ({ value: name, label: c.label }))}
        value={value.priority}
        onChange={(priority) => onChange({ ...value, priority: (priority as PriorityClass) ?? "normal" })}
        error={errors["options.urgency"] ?? errors["options.preemptible"]}
        disabled={optionsLocked}
        allowDeselect={false}
      />
    </Stack>
  );
}

export function ResourcesStepForm(props: {
  catalog: Catalog;
  value: ResourceForm;
  onChange: (value: ResourceForm) => void;
  errors: FieldErrors;
}) {
  const { catalog, value, onChange, errors } = props;
  const models = catalog.models.map((m) => ({ value: m.name, label: `${m.name} · ${m.memory_gb} GB · ${m.units} units` }));
  const profiles = [
    ...new Set(
      catalog.models.filter((m) => !value.model || m.name === value.model).flatMap((m) => m.mig_profiles.map((p) => p.name)),
    ),
  ];
  const migModels = catalog.models.filter((m) => m.mig_profiles.length > 0).map((m) => m.name);
  const kindError = errors["resources.kind"] ?? errors.resources;
  return (
    <Stack>
      <Stack gap={4}>
        <Text component="div" id="resource-kind-label" fw={500} size="sm">
          Resource type
        </Text>
        <SegmentedControl
          aria-labelledby="resource-kind-label"
          size="md"
          fullWidth
          data={[
            { value: "gpu", label: "Whole GPUs" },
            { value: "mig", label: "MIG profile" },
            { value: "units", label: "Compute units" },
          ]}
          value={value.kind}
          onChange={(kind) => onChange({ ...value, kind: kind as ResourceKind, model: kind === "units" ? "" : value.model })}
        />
        {kindError ? (
          <Text c="red.8" size="sm" role="alert">
            {kindError}
          </Text>
        ) : null}
      </Stack>
      {value.kind === "gpu" ? (
        <>
          <Select
            label="GPU type"
            placeholder="Pick a GPU model"
            data={models}
            value={value.model || null}
            onChange={(model) => onChange({ ...value, model: model ?? "" })}
            error={errors["resources.model"]}
            allowDeselect={false}
            required
          />
          <NumberInput
          hideControls
            label="GPU count"
            min={1}
            max={64}
            value={value.count}
            onChange={(count) => onChange({ ...value, count: Number(count) })}
            error={errors["resources.count"]}
            required
          />
        </>
      ) : null}
      {value.kind === "mig" ? (
        <>
          <Select
            label="GPU model (optional)"
            placeholder="Any model with this profile"
            data={migModels}
            value={value.model || null}
            onChange={(model) => onChange({ ...value, model: model ?? "", profile: "" })}
            error={errors["resources.model"]}
            clearable
          />
          <Select
            label="MIG profile"
            placeholder="Pick a profile"
            data={profiles}
            value={value.profile || null}
            onChange={(profile) => onChange({ ...value, profile: profile ?? "" })}
            error={errors["resources.profile"]}
            allowDeselect={false}
            required
          />
        </>
      ) : null}
      {value.kind === "units" ? (
        <NumberInput
          hideControls
          label="Compute units"
          description="1 unit = 1/8 of an A100; the scheduler picks the GPU model, MIG profile or share"
          min={0.125}
          max={1024}
          step={0.5}
          decimalScale={3}
          value={value.units}
          onChange={(units) => onChange({ ...value, units: Number(units) })}
          error={errors["resources.units"]}
          required
        />
      ) : null}
    </Stack>
  );
}

export interface NetworkForm {
  vpc_id: string;
  subnet_id: string;
  security_group_id: string;
  public_ip: boolean;
}
export const EMPTY_NETWORK: NetworkForm = { vpc_id: "", subnet_id: "", security_group_id: "", public_ip: false };

export function NetworkStepForm(props: { value: NetworkForm; onChange: (value: NetworkForm) => void; errors: FieldErrors }) {
  const { value, onChange, errors } = props;
  const text = (key: "vpc_id" | "subnet_id" | "security_group_id", label: string, placeholder: string) => (
    <TextInput
      label={label}
      placeholder={placeholder}
      value={value[key]}
      onChange={(e) => onChange({ ...value, [key]: e.currentTarget.value })}
      error={errors[`network.${key}`]}
      required
    />
  );
  return (
    <Stack>
      {text("vpc_id", "VPC ID", "vpc-0a1b2c3d")}
      {text("subnet_id", "Subnet ID", "subnet-0a1b2c3d")}
      {text("security_group_id", "Security group ID", "sg-0a1b2c3d")}
      <Checkbox
        label="Public IP address"
        checked={value.public_ip}
        onChange={(e) => onChange({ ...value, public_ip: e.currentTarget.checked })}
        error={errors["network.public_ip"]}
      />
    </Stack>
  );
}
