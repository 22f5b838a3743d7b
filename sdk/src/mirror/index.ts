// @trove/sdk/mirror: keep a local directory (or a sink) equal to a store or subtree.

export { DirectorySink, type DirectorySinkOptions } from "./directory-sink.js";
export {
  type MirrorEvent,
  type MirrorOptions,
  MirrorRefusedError,
  type MirrorStats,
  mirror,
  StoreMirror,
} from "./mirror.js";
export type { MirrorSink, MirrorState } from "./sink.js";
export { MirrorDatabase, type MirrorEntry, type MirrorIdentity } from "./state-database.js";
