// What a client can observe of a backend, for comparing a restored one with its original
// (test/backup): every store, node, version, content, project, environment, promotion and report.

import { createHash } from "node:crypto";
import type { NodeRecord, StoragePort } from "../../src/storage/port.js";

/** Bytes as a stream of one chunk (what writeBlob and restoreArchive read). */
export async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/**
 * A store `home` that keeps versions, in `storage`: a directory of `files` files (every fifth of
 * 200,000 bytes, a blob; the others of 300 bytes, inline), then one of them deleted.
 */
export async function fillStore(storage: StoragePort, files: number, t0: number): Promise<void> {
  await storage.createStore(
    { name: "home", type: "recursive", settings: { "keep-deleted": "7d", "keep-versions": "30d" } },
    t0,
  );
  await storage.makeDirectory("home", "docs", {}, t0, "ann");
  for (let i = 0; i < files; i++) {
    const blob = await storage.writeBlob(once(Buffer.alloc(i % 5 === 0 ? 200_000 : 300, i)), { maxSize: 1 << 30 });
    await storage.putFile("home", `docs/f${i}.json`, blob, "application/json", {}, t0 + i, "ann");
  }
  await storage.deleteTree("home", "docs/f1.json", {}, t0 + 100, "bob");
}

export async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of chunks) out.push(Buffer.from(c));
  return Buffer.concat(out);
}

/** What a client can observe of a backend: every store, node, version, content, project and report. */
export async function dump(storage: StoragePort): Promise<unknown> {
  const sha = async (chunks: AsyncIterable<Uint8Array>) =>
    createHash("sha256")
      .update(await collect(chunks))
      .digest("hex");
  const node = async (n: NodeRecord) => ({
    ...n,
    inline: null,
    user: n.user ?? "",
    contents: n.directory || n.deleted ? null : await sha(storage.readBlob(n)),
  });
  const stores = [];
  for (const s of await storage.listStores()) {
    const name = s.config.name;
    const nodes = [];
    const root = await storage.getNode(name, "");
    if (root) nodes.push(await node(root));
    for await (const batch of storage.listNodes(name, "", { recursive: true, includeDeleted: true })) {
      for (const n of batch) nodes.push(await node(n));
    }
    const versions = [];
    for await (const batch of storage.listEndedVersions(name, Number.MAX_SAFE_INTEGER, {})) {
      for (const v of batch) versions.push({ ...(await node(v)), endedEventId: v.endedEventId, ended: v.ended });
    }
    const { rootTag: _rootTag, ...record } = s;
    stores.push({ record, nodes, versions });
  }
  const projects = [];
  for (const p of await storage.insights.listProjects()) {
    const environments = [];
    for (const e of await storage.insights.listEnvironments(p.id)) {
      const promotions = [];
      for await (const pr of storage.insights.listPromotions(e.id)) promotions.push(pr);
      const reports = [];
      for (const r of await storage.insights.listReports(p.id, e.id)) {
        reports.push({
          ...r,
          document: r.document && { ...r.document, inline: null },
          contents: r.document && (await sha(storage.insights.readReportDocument(r))),
        });
      }
      environments.push({ ...e, promotions, reports });
    }
    projects.push({ ...p, environments });
  }
  return { stores, projects };
}
