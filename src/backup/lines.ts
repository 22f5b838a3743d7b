// The records of an archive's JSON Lines parts (docs/backup.md, "The parts") and the storage
// port's records, both ways: the one place that knows what a line carries, for the backup that
// writes lines and for the restore that hands them to every backend. A line is its record as it
// is, spread rather than listed field by field, so that a field added to NodeRecord or
// ReportRecord travels through every backup and restore without an edit here.

import type { NodeRecord, ReportRecord, VersionRecord } from "../storage/port.js";

/** A node or version as a line of `nodes-*.jsonl` / `versions-*.jsonl`: the record without store, contents in base64. */
export type NodeLine = Omit<NodeRecord, "store" | "inline"> & { user: string; inline?: string };
export type VersionLine = NodeLine & { endedEventId: number; ended: number };
/** A report as a line of `reports-*.jsonl`: the record without its job's lease; a small document in base64. */
export type ReportLine = Omit<ReportRecord, "leaseOwner" | "leaseExpires" | "document"> & {
  document: { blob: string; size: number; md5: string; inline?: string } | null;
};

/**
 * The line of a node, but its contents: a small resource's `inline` (base64) is the line's last
 * member, which the writer appends (JsonLines in backup.ts). A node read as a state of a listing
 * as of an event carries that state's end, which is not the node's: left out.
 */
export function lineOfNode(n: NodeRecord | VersionRecord): NodeLine {
  const { store: _store, inline: _contents, endedEventId: _event, ended: _ended, ...fields } = n as VersionRecord;
  return { ...fields, user: n.user ?? "" };
}

/** The line of a kept version, its end included, but its contents (as lineOfNode). */
export function lineOfVersion(v: VersionRecord): VersionLine {
  const { store: _store, inline: _contents, ...fields } = v;
  return fields;
}

/** The record of a node's or a version's line, in `store`. */
export function stateOfLine(store: string, l: VersionLine): VersionRecord;
export function stateOfLine(store: string, l: NodeLine): NodeRecord;
export function stateOfLine(store: string, l: NodeLine): NodeRecord {
  const { inline, ...fields } = l;
  return { ...fields, store, inline: inline === undefined ? null : Buffer.from(inline, "base64") };
}

export function lineOfReport(r: ReportRecord, inline: string | undefined): ReportLine {
  const { leaseOwner: _owner, leaseExpires: _expires, document, ...rest } = r;
  const doc = document && { blob: document.blob, size: document.size, md5: document.md5 };
  return { ...rest, document: doc && (inline === undefined ? doc : { ...doc, inline }) };
}

/** A report as a restored server keeps it: no job holds its lease. */
export function reportOfLine(l: ReportLine): ReportRecord {
  const d = l.document;
  return {
    ...l,
    leaseOwner: "",
    leaseExpires: 0,
    document: d && {
      blob: d.blob,
      size: d.size,
      md5: d.md5,
      inline: d.inline === undefined ? null : Buffer.from(d.inline, "base64"),
    },
  };
}
