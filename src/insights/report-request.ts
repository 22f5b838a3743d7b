// Input checks for the report API: the report request (create) and the inputs of getting a
// report by ID. Every problem found is named in one BadRequestError; nothing is created.

import { BadRequestError } from "../domain/errors.js";
import { ADDITIONAL_FIELDS, type AdditionalField } from "./report-document.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID.test(value);
}

export interface ReportRequest {
  projectID: string;
  environmentID: string;
  /** Requested additional fields, each once, in the order first given. */
  additionalFields: AdditionalField[];
}

export interface GetReportInput {
  reportID: string;
  projectID: string;
  environmentID: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function show(value: unknown): string {
  if (value === undefined) return "nothing";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** The UUID in `input[field]`, lower-cased; or "" after recording what is wrong. */
function uuidField(input: Record<string, unknown>, field: string, errors: string[]): string {
  const value = input[field];
  if (value === undefined || value === null || value === "") {
    errors.push(`${field} is required`);
  } else if (Array.isArray(value)) {
    errors.push(`${field} must be given once, as one UUID`);
  } else if (!isUuid(value)) {
    errors.push(`${field} must be a UUID (8-4-4-4-12 hexadecimal digits), not ${show(value)}`);
  } else {
    return value.toLowerCase();
  }
  return "";
}

function unknownFields(input: Record<string, unknown>, allowed: readonly string[], what: string, errors: string[]) {
  for (const key of Object.keys(input)) {
    if (!allowed.includes(key)) {
      errors.push(`unknown field ${show(key)} in the ${what}; allowed: ${allowed.join(", ")}`);
    }
  }
}

function fail(errors: string[]): never {
  throw new BadRequestError(errors.join("; "));
}

/** Checks a report request (the parsed JSON body of a create call). */
export function parseReportRequest(input: unknown): ReportRequest {
  if (!isObject(input)) throw new BadRequestError(`the report request must be a JSON object, not ${show(input)}`);
  const errors: string[] = [];
  unknownFields(input, ["projectID", "environmentID", "additionalFields"], "report request", errors);
  const projectID = uuidField(input, "projectID", errors);
  const environmentID = uuidField(input, "environmentID", errors);
  const additionalFields: AdditionalField[] = [];
  const requested = input.additionalFields;
  if (requested !== undefined && requested !== null) {
    if (!Array.isArray(requested)) {
      errors.push(`additionalFields must be an array of strings, not ${show(requested)}`);
    } else {
      for (const item of requested) {
        if (!(ADDITIONAL_FIELDS as readonly unknown[]).includes(item)) {
          errors.push(`additionalFields: ${show(item)} is not allowed; allowed: ${ADDITIONAL_FIELDS.join(", ")}`);
        } else if (!additionalFields.includes(item as AdditionalField)) {
          additionalFields.push(item as AdditionalField);
        }
      }
    }
  }
  if (errors.length > 0) fail(errors);
  return { projectID, environmentID, additionalFields };
}

/**
 * Checks the inputs of getting a report by ID (or its document, or a query over it), however
 * the face carries them: path and query parameters for REST, message fields for gRPC.
 */
export function parseGetReportInput(input: unknown, extraFields: readonly string[] = []): GetReportInput {
  if (!isObject(input)) throw new BadRequestError(`the report inputs must be an object, not ${show(input)}`);
  const errors: string[] = [];
  unknownFields(input, ["reportID", "projectID", "environmentID", ...extraFields], "report inputs", errors);
  const reportID = uuidField(input, "reportID", errors);
  const projectID = uuidField(input, "projectID", errors);
  const environmentID = uuidField(input, "environmentID", errors);
  if (errors.length > 0) fail(errors);
  return { reportID, projectID, environmentID };
}
