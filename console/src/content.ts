// Reading a resource's bytes over Connect (ResourceService.Read, server streaming), and saving them as a download.

import type { Clients } from "./api.js";

/** The resource's contents and its current tag. */
export async function readResource(
  clients: Clients,
  store: string,
  path: string,
  signal?: AbortSignal,
  /** A kept state (its tag) or a moment (docs/history.md) instead of the current contents. */
  at: { version?: string; asOf?: string } = {},
): Promise<{ bytes: Blob; tag: string; type: string }> {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let tag = "";
  let type = "";
  for await (const message of clients.resources.read({ store, path, ...at }, { signal })) {
    if (message.resource) {
      tag = message.resource.tag;
      type = message.resource.type;
    }
    if (message.chunk.byteLength > 0) chunks.push(new Uint8Array(message.chunk));
  }
  return { bytes: new Blob(chunks, { type }), tag, type };
}

/** Whether a type reads as text in the viewer. */
export function isText(type: string): boolean {
  return /^text\/|[/+](json|xml|javascript|yaml|x-yaml|csv)\b/.test(type) || type === "";
}

export function saveAs(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
