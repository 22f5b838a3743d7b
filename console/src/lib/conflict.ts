// Writes that must not silently replace someone else's change: the precondition a write sends
// (If-Match with the tag the user saw, If-None-Match: * for a name that was free), and what the
// answer means for the user ("changed since you opened it", offering reload or overwrite).

/** What the user saw of the target before writing: its tag, or that nothing was there. */
export type Seen = { tag: string } | { absent: true };

export type Precondition = { "If-Match": string } | { "If-None-Match": "*" } | Record<string, never>;

/** The precondition header of a write, given what the user saw; an overwrite the user chose sends the tag it was shown. */
export function preconditionFor(seen: Seen | undefined): Precondition {
  if (seen === undefined) return {};
  if ("absent" in seen) return { "If-None-Match": "*" };
  return { "If-Match": `"${seen.tag}"` };
}

export type WriteOutcome =
  | { kind: "written"; tag: string | undefined }
  | { kind: "conflict"; message: string }
  | { kind: "failed"; message: string };

/** What a write's HTTP answer (REST v2 PUT) means for the user. */
export function writeOutcome(status: number, etag: string | null, body: string, seen: Seen | undefined): WriteOutcome {
  if (status >= 200 && status < 300) return { kind: "written", tag: etag?.replace(/^"|"$/g, "") };
  if (status === 412) {
    const message =
      seen !== undefined && "absent" in seen
        ? "Someone created this resource since you opened the folder."
        : "This resource changed since you opened it.";
    return { kind: "conflict", message };
  }
  const reason = body.trim() || `HTTP ${status}`;
  return { kind: "failed", message: `${statusText(status)}: ${reason}` };
}

function statusText(status: number): string {
  if (status === 401) return "Not signed in";
  if (status === 403) return "Not allowed";
  if (status === 404) return "Not found";
  if (status === 409) return "Conflict";
  if (status === 413) return "Too large";
  if (status >= 500) return "Server error";
  return "Refused";
}

/**
 * The resolution of a conflict: "reload" shows the current version (the user's edit is kept aside);
 * "overwrite" writes again, this time against the tag the server has now (so a third change made
 * meanwhile is still caught), or as a new resource when it was deleted meanwhile.
 */
export function overwriteSeen(current: { tag: string } | undefined): Seen {
  return current ? { tag: current.tag } : { absent: true };
}
