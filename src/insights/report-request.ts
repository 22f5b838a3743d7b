// Input checks for the report API: the report request (create) and the inputs of getting a
// report by ID. Every problem found is named in one BadRequestError; nothing is created.
//
// The inputs are keyed by the specification's names (projectID); the messages name each field
// as the caller's face does, given by its proto name (project_id): see services/field-names.ts.

import { BadRequestError } from "../domain/errors.js";
import { type Moment, parseMoment } from "../domain/history.js";
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
  /** Trove's extension: the moment the report describes; undefined: now. */
  asOf?: Moment;
}

export interface GetReportInput {
  reportID: string;
  projectID: string;
  environmentID: string;
}

/** The proto field of each input, which `FieldLabel` is asked about. */
const PROTO_FIELDS: Readonly<Record<string, string>> = {
  reportID: "report_id",
  projectID: "project_id",
  environmentID: "environment_id",
  additionalFields: "additional_fields",
  asOf: "as_of",
};

/** The name a message gives a field, asked by its proto name; the default is the spec's name. */
export type FieldLabel = (protoField: string) => string;

const SPEC_NAMES = Object.fromEntries(Object.entries(PROTO_FIELDS).map(([spec, proto]) => [proto, spec]));
const specLabel: FieldLabel = (field) => SPEC_NAMES[field] ?? field;

function labelOf(key: string, label: FieldLabel): string {
  const proto = PROTO_FIELDS[key];
  return proto === undefined ? key : label(proto);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function show(value: unknown): string {
  if (value === undefined) return "nothing";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** The UUID in `input[key]`, lower-cased; or "" after recording what is wrong. */
function uuidField(input: Record<string, unknown>, key: string, label: FieldLabel, errors: string[]): string {
  const value = input[key];
  const field = labelOf(key, label);
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
export function parseReportRequest(input: unknown, label: FieldLabel = specLabel): ReportRequest {
  if (!isObject(input)) throw new BadRequestError(`the report request must be a JSON object, not ${show(input)}`);
  const errors: string[] = [];
  unknownFields(input, ["projectID", "environmentID", "additionalFields", "asOf"], "report request", errors);
  const projectID = uuidField(input, "projectID", label, errors);
  const environmentID = uuidField(input, "environmentID", label, errors);
  const additionalFields: AdditionalField[] = [];
  const requested = input.additionalFields;
  const fieldsName = labelOf("additionalFields", label);
  if (requested !== undefined && requested !== null) {
    if (!Array.isArray(requested)) {
      errors.push(`${fieldsName} must be an array of strings, not ${show(requested)}`);
    } else {
      for (const item of requested) {
        if (!(ADDITIONAL_FIELDS as readonly unknown[]).includes(item)) {
          errors.push(`${fieldsName}: ${show(item)} is not allowed; allowed: ${ADDITIONAL_FIELDS.join(", ")}`);
        } else if (!additionalFields.includes(item as AdditionalField)) {
          additionalFields.push(item as AdditionalField);
        }
      }
    }
  }
  let asOf: Moment | undefined;
  const moment = input.asOf;
  const asOfName = labelOf("asOf", label);
  if (typeof moment === "string" && moment !== "") {
    try {
      asOf = parseMoment(moment, asOfName);
    } catch (error) {
      errors.push((error as Error).message);
    }
  } else if (moment !== undefined && moment !== null && moment !== "") {
    errors.push(
      `${asOfName} must be a string (an event id or an ISO 8601 date-time with a time zone), not ${show(moment)}`,
    );
  }
  if (errors.length > 0) fail(errors);
  return asOf === undefined
    ? { projectID, environmentID, additionalFields }
    : { projectID, environmentID, additionalFields, asOf };
}

/**
 * Checks the inputs of getting a report by ID (or its document, or a query over it), however
 * the face carries them: path and query parameters for REST, message fields for gRPC.
 */
export function parseGetReportInput(
  input: unknown,
  extraFields: readonly string[] = [],
  label: FieldLabel = specLabel,
): GetReportInput {
  if (!isObject(input)) throw new BadRequestError(`the report inputs must be an object, not ${show(input)}`);
  const errors: string[] = [];
  unknownFields(input, ["reportID", "projectID", "environmentID", ...extraFields], "report inputs", errors);
  const reportID = uuidField(input, "reportID", label, errors);
  const projectID = uuidField(input, "projectID", label, errors);
  const environmentID = uuidField(input, "environmentID", label, errors);
  if (errors.length > 0) fail(errors);
  return { reportID, projectID, environmentID };
}
