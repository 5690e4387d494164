// Create: the three-step wizard (image → resources → network) on a scheduler draft, then a review that submits it.
import { Button, Group, SimpleGrid, Stack, Stepper, Title } from "@mantine/core";
import { useMediaQuery } from "@mantine/hooks";
import { useEffect, useState } from "react";
import { useSearchParams } from "react-router-dom";
import { ApiError } from "../../api/client";
import { ErrorAlert, QueryStatus } from "../../components/QueryStatus";
import { PredictionText, PriceText, QueueText, RecommendationCard } from "./Advice";
import {
  useCatalog,
  useDraft,
  useFillStep,
  useImages,
  useOpenDraft,
  usePrediction,
  usePrices,
  useQueuePreview,
  useRecommendation,
  useSubmitDraft,
  type Draft,
  type StepName,
} from "./queries";
import { EMPTY_RESOURCES, pricePerHour, resourceBody, resourceForm, type ResourceForm } from "./resources";
import { classOf, PRIORITY_CLASSES } from "./preview";
import { ReviewStep, Submitted } from "./ReviewStep";
import {
  EMPTY_IMAGE,
  EMPTY_NETWORK,
  ImageStepForm,
  NetworkStepForm,
  ResourcesStepForm,
  type FieldErrors,
  type ImageForm,
  type NetworkForm,
} from "./StepForms";

const STEPS: StepName[] = ["image", "resources", "network"];
/** Fields the forms show at an input; any other field the service names goes to the step's alert. */
const SHOWN = new Set([
  "image",
  "image.name",
  "image.version",
  "options.kind",
  "options.urgency",
  "options.preemptible",
  "resources",
  "resources.kind",
  "resources.model",
  "resources.count",
  "resources.profile",
  "resources.units",
  "network.vpc_id",
  "network.subnet_id",
  "network.security_group_id",
  "network.public_ip",
]);

function stepOf(field: string): number {
  const index = STEPS.findIndex((s) => field === s || field.startsWith(`${s}.`));
  return index < 0 ? 0 : index;
}

function formsOf(draft: Draft) {
  const steps = draft.steps as Record<string, Record<string, unknown> | null>;
  const options = (steps.options ?? {}) as { kind?: string; urgency?: number };
  const image: ImageForm = {
    name: String(steps.image?.name ?? ""),
    version: String(steps.image?.version ?? ""),
    kind: options.kind === "job" ? "job" : "instance",
    priority: classOf(typeof options.urgency === "number" ? options.urgency : 0.5),
  };
  const network: NetworkForm = { ...EMPTY_NETWORK, ...((steps.network ?? {}) as Partial<NetworkForm>) };
  const first = STEPS.findIndex((s) => draft.missing.includes(s));
  return { image, resources: resourceForm(steps.resources), network, active: first < 0 ? STEPS.length : first };
}

export default function CreatePage() {
  const [params, setParams] = useSearchParams();
  const draftId = params.get("draft");
  const draft = useDraft(draftId);
  const images = useImages();
  const catalog = useCatalog();
  const prices = usePrices();
  const open = useOpenDraft();
  const fill = useFillStep();
  const submit = useSubmitDraft();
  const mobile = useMediaQuery("(max-width: 48em)");

  const [active, setActive] = useState(0);
  const [image, setImage] = useState<ImageForm>(EMPTY_IMAGE);
  const [resources, setResources] = useState<ResourceForm>(EMPTY_RESOURCES);
  const [network, setNetwork] = useState<NetworkForm>(EMPTY_NETWORK);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [stepError, setStepError] = useState<unknown>(null);
  const [loaded, setLoaded] = useState<string | null>(null);
  const [mode, setMode] = useState<"training" | "inference">("training");
  const [sizeB, setSizeB] = useState<number | undefined>(undefined);

  useEffect(() => {
    if (!draft.data || loaded === draft.data.draft_id) return;
    const forms = formsOf(draft.data);
    setImage(forms.image);
    setResources(forms.resources);
    setNetwork(forms.network);
    setActive(forms.active);
    setLoaded(draft.data.draft_id);
  }, [draft.data, loaded]);

  const framework = images.data?.find((i) => i.name === image.name)?.framework;
  const recommendation = useRecommendation({ framework, mode, model_size_b: sizeB });
  const gpuModel = resources.kind === "gpu" && resources.model ? resources.model : undefined;
  const prediction = usePrediction({ framework, model: gpuModel }, image.name !== "");
  const preview = useQueuePreview(
    { priority: image.priority, gpu_model: gpuModel, gpu_count: resources.kind === "gpu" ? resources.count : undefined },
    active === STEPS.length,
  );
  const price = prices.data && catalog.data ? pricePerHour(resources, prices.data, catalog.data) : null;

  function refused(error: unknown) {
    if (error instanceof ApiError && error.field && SHOWN.has(error.field)) {
      setErrors({ [error.field]: error.message });
      setActive(stepOf(error.field));
    } else setStepError(error);
  }

  async function save(step: StepName, body: Record<string, unknown>) {
    setErrors({});
    setStepError(null);
    try {
      let id = draftId;
      if (id === null) {
        const { urgency, preemptible } = PRIORITY_CLASSES[image.priority];
        const opened = await open.mutateAsync({ kind: image.kind, urgency, preemptible });
        id = opened.draft_id;
        setLoaded(id);
        setParams({ draft: id }, { replace: true });
      }
      await fill.mutateAsync({ draftId: id, step, body });
      setActive((a) => a + 1);
    } catch (error) {
      refused(error);
    }
  }

  async function send() {
    if (draftId === null) return;
    setErrors({});
    setStepError(null);
    await submit.mutateAsync(draftId).catch(refused);
  }

  function next() {
    if (active === 0) void save("image", { name: image.name, version: image.version });
    else if (active === 1) void save("resources", resourceBody(resources));
    else void save("network", { ...network });
  }

  const advice = (
    <>
      <PredictionText query={prediction} />
      <PriceText price={price} />
      {active === STEPS.length ? <QueueText query={preview} /> : null}
    </>
  );
  const busy = open.isPending || fill.isPending;
  const workloadId = submit.data?.workload_id ?? draft.data?.workload_id ?? null;
  const ready = images.data && catalog.data;

  return (
    <Stack>
      <Title order={1}>Create</Title>
      {draftId && draft.error ? <ErrorAlert error={draft.error} title="Could not load the draft" /> : null}
      <QueryStatus query={images.error ? images : catalog} label="the catalog">
        {ready ? (
          <Stepper
            active={active}
            onStepClick={(step) => step < active && setActive(step)}
            orientation={mobile ? "vertical" : "horizontal"}
            allowNextStepsSelect={false}
            iconSize={44}
          >
            <Stepper.Step label="Image" description="Framework and version">
              <ImageStepForm
                images={images.data ?? []}
                value={image}
                onChange={setImage}
                errors={errors}
                optionsLocked={draftId !== null}
              />
            </Stepper.Step>
            <Stepper.Step label="Resources" description="GPU type × count, MIG or units">
              <SimpleGrid cols={{ base: 1, md: 2 }}>
                <Stack>
                  <ResourcesStepForm catalog={catalog.data!} value={resources} onChange={setResources} errors={errors} />
                  {advice}
                </Stack>
                <RecommendationCard
                  query={recommendation}
                  mode={mode}
                  onMode={setMode}
                  sizeB={sizeB}
                  onSize={setSizeB}
                  onUse={(model, count) => setResources({ ...resources, kind: "gpu", model, count })}
                />
              </SimpleGrid>
            </Stepper.Step>
            <Stepper.Step label="Network" description="VPC, subnet, security group">
              <NetworkStepForm value={network} onChange={setNetwork} errors={errors} />
            </Stepper.Step>
            <Stepper.Completed>
              {workloadId ? (
                <Submitted workloadId={workloadId} />
              ) : (
                <ReviewStep
                  image={image}
                  resources={resources}
                  network={network}
                  advice={advice}
                  submitting={submit.isPending}
                  error={stepError}
                  onSubmit={() => void send()}
                />
              )}
            </Stepper.Completed>
          </Stepper>
        ) : null}
      </QueryStatus>
      {active < STEPS.length ? (
        <>
          <ErrorAlert error={stepError} title="Step refused" />
          <Group justify="space-between">
            <Button size="md" mih={44} variant="default" onClick={() => setActive((a) => a - 1)} disabled={active === 0}>
              Back
            </Button>
            <Button size="md" mih={44} onClick={next} loading={busy}>
              Next
            </Button>
          </Group>
        </>
      ) : workloadId ? null : (
        <Group>
          <Button size="md" mih={44} variant="default" onClick={() => setActive(STEPS.length - 1)}>
            Back
          </Button>
        </Group>
      )}
    </Stack>
  );
}
