// Input checks of the report API: the report request (create) and the inputs of getting a
// report by ID, and the shapes of the report reference and status record.

import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import {
  DAY_MS,
  DEFAULT_REPORT_AVAILABILITY_MS,
  isReportAvailable,
  parseGetReportInput,
  parseReportRequest,
  reportExpiresAt,
  reportReference,
  reportStatusRecord,
} from "../../src/insights/index.js";

const PROJECT = "0b6f3c1e-5a7d-4c2b-9e8f-1a2b3c4d5e6f";
const ENVIRONMENT = "7d9e1f20-3b4c-4d5e-8f60-718293a4b5c6";
const REPORT = "c3a1e0f4-9b2d-4e6f-a718-29304a5b6c7d";

function badRequest(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(BadRequestError);
    return (error as Error).message;
  }
  throw new Error("expected a BadRequestError");
}

describe("Report request (input)", () => {
  it("projectID and environmentID (uuid) are required; additionalFields is optional", () => {
    expect(parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT })).toEqual({
      projectID: PROJECT,
      environmentID: ENVIRONMENT,
      additionalFields: [],
    });
  });

  it("projectID missing: 'projectID is required'", () => {
    expect(badRequest(() => parseReportRequest({ environmentID: ENVIRONMENT }))).toBe("projectID is required");
  });

  it("environmentID not a uuid: says so and shows the value", () => {
    expect(badRequest(() => parseReportRequest({ projectID: PROJECT, environmentID: "production" }))).toBe(
      'environmentID must be a UUID (8-4-4-4-12 hexadecimal digits), not "production"',
    );
    expect(badRequest(() => parseReportRequest({ projectID: 42, environmentID: ENVIRONMENT }))).toBe(
      "projectID must be a UUID (8-4-4-4-12 hexadecimal digits), not 42",
    );
  });

  it("UUIDs are accepted in any case and returned in lower case", () => {
    expect(parseReportRequest({ projectID: PROJECT.toUpperCase(), environmentID: ENVIRONMENT }).projectID).toBe(
      PROJECT,
    );
  });

  it("additionalFields allows only lastPromotedDate and lastPromotedBy, each kept once", () => {
    expect(
      parseReportRequest({
        projectID: PROJECT,
        environmentID: ENVIRONMENT,
        additionalFields: ["lastPromotedBy", "lastPromotedDate", "lastPromotedBy"],
      }).additionalFields,
    ).toEqual(["lastPromotedBy", "lastPromotedDate"]);
    expect(
      badRequest(() =>
        parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, additionalFields: ["lastModifiedBy"] }),
      ),
    ).toBe('additionalFields: "lastModifiedBy" is not allowed; allowed: lastPromotedDate, lastPromotedBy');
    expect(
      badRequest(() =>
        parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, additionalFields: "lastPromotedBy" }),
      ),
    ).toBe('additionalFields must be an array of strings, not "lastPromotedBy"');
  });

  it("every problem is named at once; unknown fields too", () => {
    expect(badRequest(() => parseReportRequest({ projectId: PROJECT, additionalFields: [1] }))).toBe(
      [
        'unknown field "projectId" in the report request; allowed: projectID, environmentID, additionalFields, asOf',
        "projectID is required",
        "environmentID is required",
        "additionalFields: 1 is not allowed; allowed: lastPromotedDate, lastPromotedBy",
      ].join("; "),
    );
  });

  it("asOf (Trove's extension): an event id or an ISO 8601 date-time with a zone; anything else named with the rest", () => {
    expect(parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, asOf: "42" }).asOf).toEqual({
      event: 42,
    });
    expect(
      parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, asOf: "2026-11-27T15:00:00+01:00" }).asOf,
    ).toEqual({ time: Date.parse("2026-11-27T14:00:00Z") });
    expect(parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, asOf: "" })).not.toHaveProperty("asOf");
    expect(badRequest(() => parseReportRequest({ projectID: PROJECT, asOf: "yesterday" }))).toBe(
      [
        "environmentID is required",
        'asOf "yesterday" is neither an event id (a whole number) nor an ISO 8601 date-time with a time zone (e.g. 2026-11-27T15:00:00Z)',
      ].join("; "),
    );
    expect(
      badRequest(() =>
        parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, asOf: "2026-11-27T15:00:00" }),
      ),
    ).toMatch(/^asOf "2026-11-27T15:00:00" is neither/);
    expect(badRequest(() => parseReportRequest({ projectID: PROJECT, environmentID: ENVIRONMENT, asOf: 42 }))).toBe(
      "asOf must be a string (an event id or an ISO 8601 date-time with a time zone), not 42",
    );
  });

  it("a body that is not a JSON object is refused", () => {
    expect(badRequest(() => parseReportRequest([PROJECT]))).toBe(
      'the report request must be a JSON object, not ["0b6f3c1e-5a7d-4c2b-9e8f-1a2b3c4d5e6f"]',
    );
    expect(badRequest(() => parseReportRequest(null))).toBe("the report request must be a JSON object, not null");
  });
});

describe("Get a report by ID: reportID, projectID, environmentID (all required, uuid)", () => {
  it("accepts the three UUIDs", () => {
    expect(parseGetReportInput({ reportID: REPORT, projectID: PROJECT, environmentID: ENVIRONMENT })).toEqual({
      reportID: REPORT,
      projectID: PROJECT,
      environmentID: ENVIRONMENT,
    });
  });

  it("names each missing or malformed input", () => {
    expect(badRequest(() => parseGetReportInput({ reportID: "42", projectID: PROJECT }))).toBe(
      'reportID must be a UUID (8-4-4-4-12 hexadecimal digits), not "42"; environmentID is required',
    );
    expect(
      badRequest(() => parseGetReportInput({ reportID: "", projectID: PROJECT, environmentID: ENVIRONMENT })),
    ).toBe("reportID is required");
  });

  it("an input given twice (a repeated query parameter) is refused", () => {
    expect(
      badRequest(() =>
        parseGetReportInput({ reportID: REPORT, projectID: [PROJECT, PROJECT], environmentID: ENVIRONMENT }),
      ),
    ).toBe("projectID must be given once, as one UUID");
  });

  it("unknown inputs are refused unless the face declares them", () => {
    const input = { reportID: REPORT, projectID: PROJECT, environmentID: ENVIRONMENT, path: "/a.block" };
    expect(badRequest(() => parseGetReportInput(input))).toBe(
      'unknown field "path" in the report inputs; allowed: reportID, projectID, environmentID',
    );
    expect(parseGetReportInput(input, ["path"]).reportID).toBe(REPORT);
  });
});

describe("Report reference and report status record", () => {
  it("Report reference: reportID is an array of one uuid", () => {
    expect(reportReference(REPORT)).toEqual({ reportID: [REPORT] });
  });

  it("Report status record: id and created are arrays; created is ISO 8601 UTC with milliseconds; no href while generating", () => {
    const created = Date.UTC(2026, 2, 1, 12, 0, 0, 7);
    expect(reportStatusRecord({ id: REPORT, creator: "alice", created, status: "generating", href: "/x" })).toEqual({
      id: [REPORT],
      creator: "alice",
      created: ["2026-03-01T12:00:00.007Z"],
      status: "generating",
    });
    expect(
      reportStatusRecord({ id: REPORT, creator: "alice", created, status: "generated", href: "/insights/v1/x" }),
    ).toEqual({
      id: [REPORT],
      creator: "alice",
      created: ["2026-03-01T12:00:00.007Z"],
      status: "generated",
      href: "/insights/v1/x",
    });
  });

  it("a generated report is available for 90 days after it was generated, then not", () => {
    expect(DEFAULT_REPORT_AVAILABILITY_MS).toBe(90 * DAY_MS);
    const report = { created: 1_000, finished: 5_000 };
    expect(reportExpiresAt(report)).toBe(5_000 + 90 * DAY_MS);
    expect(isReportAvailable(report, 5_000 + 90 * DAY_MS - 1)).toBe(true);
    expect(isReportAvailable(report, 5_000 + 90 * DAY_MS)).toBe(false);
    expect(reportExpiresAt({ created: 1_000 }, DAY_MS)).toBe(1_000 + DAY_MS);
  });
});
