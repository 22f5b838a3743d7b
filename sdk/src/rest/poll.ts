// The poll operation's text/plain events: `CHANGE|id|idr://store/path|op|prev|tag|type`
// and `RESET store id`, parsed into typed values.

/** A change of a resource or directory. */
export interface FeedChange {
  kind: "change";
  store: string;
  eventId: number;
  /** idr://{store}/{path}, segments percent-encoded. */
  uri: string;
  /** Path within the store, decoded, without leading slash; "" for the root directory. */
  path: string;
  operation: "modify" | "delete";
  /** Tag before this change; "" for a creation. */
  previousTag: string;
  tag: string;
  /** MIME type of a file; "" for a directory. */
  type: string;
  /** Whether the node is a directory (its type is empty). */
  directory: boolean;
}

/** The follower must relist the store and continue from `eventId`. */
export interface FeedReset {
  kind: "reset";
  store: string;
  eventId: number;
}

export type FeedEvent = FeedChange | FeedReset;

/** Store and path of an IDR URI. */
export function parseIdrUri(uri: string): { store: string; path: string } {
  const m = /^idr:\/\/([^/]+)\/(.*)$/.exec(uri);
  if (!m) throw new Error(`not an IDR URI: ${uri}`);
  const raw = m[2] as string;
  return { store: m[1] as string, path: raw === "" ? "" : raw.split("/").map(decodeURIComponent).join("/") };
}

export function parseFeedLine(line: string): FeedEvent {
  if (line.startsWith("RESET ")) {
    const [, store, id] = line.split(" ");
    if (!store || !id || !/^\d+$/.test(id)) throw new Error(`malformed RESET line: ${line}`);
    return { kind: "reset", store, eventId: Number(id) };
  }
  const fields = line.split("|");
  if (fields.length !== 7 || fields[0] !== "CHANGE") throw new Error(`malformed event line: ${line}`);
  const [, id, uri, operation, previousTag, tag, type] = fields as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  if (!/^\d+$/.test(id) || (operation !== "modify" && operation !== "delete")) {
    throw new Error(`malformed CHANGE line: ${line}`);
  }
  const { store, path } = parseIdrUri(uri);
  return {
    kind: "change",
    store,
    eventId: Number(id),
    uri,
    path,
    operation,
    previousTag,
    tag,
    type,
    directory: type === "",
  };
}

/** Every event of a poll answer body. */
export function parseFeed(body: string): FeedEvent[] {
  return body
    .split("\n")
    .map((l) => l.replace(/\r$/, ""))
    .filter((l) => l !== "")
    .map(parseFeedLine);
}
