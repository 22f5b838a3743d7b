// A report's life as the API shows it: the reference returned on creation, the status record,
// and how long a generated report stays available (docs/insights.md).

/** "failed" is Trove's: generation gave up after its retries (docs/insights.md, Statuses). */
export const REPORT_STATUSES = ["generating", "generated", "failed"] as const;
export type ReportStatus = (typeof REPORT_STATUSES)[number];

export const DAY_MS = 24 * 60 * 60 * 1000;
/** A generated report can be accessed for 90 days, then is deleted (configurable). */
export const DEFAULT_REPORT_AVAILABILITY_MS = 90 * DAY_MS;

/** Output of creating a report: the ID in an array, as the spec's table says. */
export interface ReportReference {
  reportID: [string];
}

export function reportReference(id: string): ReportReference {
  return { reportID: [id] };
}

/** The status record, field by field as the spec's table (id and created are arrays). */
export interface ReportStatusRecord {
  id: [string];
  creator: string;
  /** ISO 8601, UTC, millisecond precision. */
  created: [string];
  status: ReportStatus;
  /** Only once generated: where the report document is served. */
  href?: string;
  /** Only when failed: why. */
  reason?: string;
}

export interface ReportState {
  id: string;
  creator: string;
  /** When the report was requested, milliseconds since the Unix epoch. */
  created: number;
  status: ReportStatus;
  href?: string;
  reason?: string;
}

export function reportStatusRecord(state: ReportState): ReportStatusRecord {
  const record: ReportStatusRecord = {
    id: [state.id],
    creator: state.creator,
    created: [new Date(state.created).toISOString()],
    status: state.status,
  };
  if (state.status === "generated" && state.href !== undefined) record.href = state.href;
  if (state.status === "failed" && state.reason !== undefined) record.reason = state.reason;
  return record;
}

/**
 * When a report and its data are deleted: `availabilityMs` after it was generated (or after it
 * failed); a report that never finishes generating goes the same time after it was requested.
 */
export function reportExpiresAt(
  report: { created: number; finished?: number | undefined },
  availabilityMs: number = DEFAULT_REPORT_AVAILABILITY_MS,
): number {
  return (report.finished ?? report.created) + availabilityMs;
}

/** Whether the report still answers at `now`; an expired one answers 404 even before its data is purged. */
export function isReportAvailable(
  report: { created: number; finished?: number | undefined },
  now: number,
  availabilityMs: number = DEFAULT_REPORT_AVAILABILITY_MS,
): boolean {
  return now < reportExpiresAt(report, availabilityMs);
}
