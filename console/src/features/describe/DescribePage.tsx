// Describe what you need: free text (English or Chinese) → a draft filled as far as the scheduler understood it.
import { Button, Stack, Textarea, Title } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { Link } from "react-router-dom";
import { ApiError } from "../../api/client";
import { ErrorAlert } from "../../components/QueryStatus";
import { useDescribe } from "./queries";
import { DraftSteps, NotUnderstood, ReadingList } from "./Reading";

const PLACEHOLDER = "e.g. give me a GPU that can run BERT / 给我分配一个能跑BERT的GPU";

export default function DescribePage() {
  const [text, setText] = useState("");
  const describe = useDescribe();
  const error = describe.error;
  const atField = error instanceof ApiError && error.field === "text" ? error.message : null;

  function send(event: FormEvent) {
    event.preventDefault();
    describe.mutate(text);
  }

  return (
    <Stack>
      <Title order={1}>Describe what you need</Title>
      <Stack component="form" onSubmit={send}>
        <Textarea
          label="Describe what you need"
          placeholder={PLACEHOLDER}
          autosize
          minRows={3}
          maxLength={2000}
          value={text}
          onChange={(e) => setText(e.currentTarget.value)}
          error={atField}
        />
        <Button type="submit" size="md" mih={44} loading={describe.isPending} disabled={text.trim() === ""}>
          Read it
        </Button>
      </Stack>
      {error && !atField ? <ErrorAlert error={error} title="Could not read the text" /> : null}
      {describe.data ? (
        <>
          <ReadingList described={describe.data} />
          <NotUnderstood words={describe.data.not_understood} />
          <DraftSteps described={describe.data} />
          <Button component={Link} to={`/create?draft=${encodeURIComponent(describe.data.draft.draft_id)}`} size="md" mih={44}>
            Continue in the wizard
          </Button>
        </>
      ) : null}
    </Stack>
  );
}
