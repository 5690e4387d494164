// A refused mutation's message at the input the service named, or nowhere (the caller then shows an alert).
import { ApiError } from "../../api/client";

/** The message for `field` when `error` named it (or named it under the body, e.g. "body.shares"). */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError) || !error.field) return undefined;
  return error.field === field || error.field.endsWith(`.${field}`) ? error.message : undefined;
}

/** Whether `error` names one of `fields` (so the form shows it inline, not in an alert). */
export function namesField(error: unknown, fields: string[]): boolean {
  return fields.some((f) => fieldError(error, f) !== undefined);
}
