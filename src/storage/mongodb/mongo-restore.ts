// Restores on MongoDB (docs/backup.md, "Restore"): the archive's records written as they are, in
// unordered inserts, replaced where their _id is already there (a re-run writes them again), and
// the mark of a restore in progress (a document of `restores`) that `trove serve` refuses to start on.

import type { Collection } from "mongodb";
import { parentOf } from "../../domain/path.js";
import type { NodeRecord, RestoreTarget, StoreRecord, VersionRecord } from "../port.js";
import { type MongoCollections, type NodeDoc, nodeKey, versionOf } from "./mongo-collections.js";
import { guard } from "./mongo-driver.js";
import { insertOrReplace, recordVersions } from "./mongo-writes.js";

const MARK_ID = "restore";

export class MongoRestore {
  constructor(private readonly c: MongoCollections) {}

  private get marks() {
    return this.c.db.collection<{ _id: string; archive: string }>("restores");
  }

  async target(): Promise<RestoreTarget> {
    return guard(async () => {
      const mark = await this.marks.findOne({ _id: MARK_ID });
      if (mark) return { state: "restoring", archive: mark.archive };
      const stores = await this.c.stores.countDocuments({});
      if (stores > 0) return { state: "used", reason: `it holds ${stores} store${stores === 1 ? "" : "s"}` };
      const projects = await this.c.db.collection("projects").countDocuments({});
      if (projects > 0) return { state: "used", reason: `it holds ${projects} project${projects === 1 ? "" : "s"}` };
      return { state: "empty" };
    });
  }

  /** Marks the database as being restored from `archive`; true when it was already (a run again). */
  async begin(archive: string): Promise<boolean> {
    const before = await guard(() =>
      this.marks.findOneAndReplace({ _id: MARK_ID }, { archive }, { upsert: true, returnDocument: "before" }),
    );
    return before?.archive === archive;
  }

  async finish(): Promise<void> {
    await guard(() => this.marks.deleteOne({ _id: MARK_ID }));
  }

  async store(s: StoreRecord): Promise<void> {
    await guard(() =>
      this.c.stores.replaceOne(
        { _id: s.config.name },
        {
          type: s.config.type,
          settings: s.config.settings,
          deleted: false,
          lastEventId: s.lastEventId,
          committedEventId: s.lastEventId,
          purgedEventId: s.purgedEventId,
          historyFrom: s.historyFrom,
          created: s.created,
          modified: s.modified,
        },
        { upsert: true },
      ),
    );
  }

  async nodes(store: string, nodes: readonly NodeRecord[]): Promise<void> {
    await guard(() =>
      insertOrReplace(
        this.c.nodes as unknown as Collection<NodeDoc & { _id: string }>,
        nodes.map((n) => ({ _id: nodeKey(store, n.path), ...nodeDoc(store, n) })),
      ),
    );
  }

  async versions(store: string, versions: readonly VersionRecord[]): Promise<void> {
    await guard(() =>
      recordVersions(
        this.c.versions,
        versions.map((v) => versionOf(nodeDoc(store, v), v.endedEventId, v.ended)),
      ),
    );
  }
}

/**
 * A node as its document: the record's fields as they are (a field added to NodeRecord is not left
 * behind), its parent, and no link to the state it replaced (the archive does not keep them).
 */
function nodeDoc(store: string, n: NodeRecord): NodeDoc {
  return { ...n, store, parent: parentOf(n.path) ?? null, user: n.user ?? "" };
}
