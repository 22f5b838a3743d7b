// The storage contract on an adapter as a server uses it: createTroveServer (src/server/server.ts)
// wraps every adapter in the metrics' measured port and then in FilesystemStorage, the decorator
// that serves filesystem stores and passes every other store through. The contract checks that
// passing through changes nothing.

import { measuredStorage, type StorageObserver } from "../../src/server/metrics-storage.js";
import { createFilesystemStorage } from "../../src/storage/filesystem/filesystem-storage.js";
import type { AdapterUnderTest } from "./contract.js";

const UNOBSERVED: StorageObserver = {
  operation() {},
  changed() {},
};

/** `open`'s adapter wrapped as createTroveServer wraps it (metrics on, the default). */
export async function asServed(open: () => Promise<AdapterUnderTest>): Promise<AdapterUnderTest> {
  const inner = await open();
  const storage = createFilesystemStorage(measuredStorage(inner.storage, UNOBSERVED));
  // Attaches the filesystem stores it finds (none in a fresh adapter) before the first operation.
  await storage.whenStarted();
  return {
    storage,
    storedBlobs: inner.storedBlobs,
    async cleanup() {
      // The decorator's close closes the adapter; the adapter's own cleanup then removes its data.
      await storage.close();
      await inner.cleanup();
    },
  };
}
