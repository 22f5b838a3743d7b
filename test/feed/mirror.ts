// A follower of the change feed that keeps an in-memory mirror of one store
// (path -> tag), following the spec's client procedure.

import { XMLParser } from "fast-xml-parser";

const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (n) => n === "resource" });

/** The store as a recursive listing shows it: path -> tag, the root ("") included. */
export async function snapshot(url: string, store: string): Promise<Map<string, string>> {
  const res = await fetch(`${url}/resources/v2/data/${store}/?recursive=true`);
  if (res.status !== 200) throw new Error(`listing answered ${res.status}`);
  const map = new Map<string, string>();
  map.set("", (res.headers.get("etag") ?? "").replaceAll('"', ""));
  const doc = parser.parse(await res.text()) as { resources: { resource?: Array<{ name: string; tag: string }> } | "" };
  const entries = doc.resources === "" ? [] : (doc.resources.resource ?? []);
  for (const e of entries) map.set(String(e.name), String(e.tag));
  return map;
}

export class Mirror {
  entries = new Map<string, string>();
  cursor = 0;
  resets = 0;

  constructor(
    private readonly url: string,
    readonly store: string,
  ) {}

  async relist(eventId: number): Promise<void> {
    this.entries = await snapshot(this.url, this.store);
    this.cursor = eventId;
    this.resets += 1;
  }

  applyChange(eventId: number, path: string, operation: string, tag: string): void {
    if (operation === "delete") {
      this.entries.delete(path);
      for (const p of [...this.entries.keys()]) if (p.startsWith(`${path}/`)) this.entries.delete(p);
    } else {
      this.entries.set(path, tag);
    }
    this.cursor = eventId;
  }

  /** Applies one line of a poll body. */
  async applyLine(line: string): Promise<void> {
    if (line.startsWith("RESET ")) {
      const [, store, id] = line.split(" ");
      if (store === this.store) await this.relist(Number(id));
      return;
    }
    const [kind, id, uri, operation, , tag] = line.split("|");
    if (kind !== "CHANGE" || !uri || !operation || tag === undefined) throw new Error(`bad event line ${line}`);
    const prefix = `idr://${this.store}/`;
    if (!uri.startsWith(prefix)) return;
    const path = uri.slice(prefix.length).split("/").map(decodeURIComponent).join("/");
    this.applyChange(Number(id), path, operation, tag);
  }
}

/** Follows a store with REST long polls until `signal` aborts. */
export async function followByPoll(mirror: Mirror, url: string, signal: AbortSignal): Promise<void> {
  const first = await (await fetch(`${url}/resources/v2/poll`)).text();
  for (const line of first.trim().split("\n")) await mirror.applyLine(line);
  while (!signal.aborted) {
    let res: Response;
    try {
      res = await fetch(`${url}/resources/v2/poll?store=${mirror.store}:${mirror.cursor}&wait=0.5`, { signal });
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    if (res.status === 204) continue;
    if (res.status !== 200) throw new Error(`poll answered ${res.status}: ${await res.text()}`);
    for (const line of (await res.text()).trim().split("\n")) await mirror.applyLine(line);
  }
}

/** The last event id of a store, from the poll's initial status line `RESET {store} {id}`. */
export async function lastEventId(url: string, store = "home"): Promise<number> {
  const text = await (await fetch(`${url}/resources/v2/poll`)).text();
  return Number(
    text
      .split("\n")
      .find((l) => l.startsWith(`RESET ${store} `))
      ?.split(" ")[2],
  );
}

/** Waits until `cond()` holds, checking every 20 ms; fails naming `what` after `ms`. */
export async function until(cond: () => boolean, what: string, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
