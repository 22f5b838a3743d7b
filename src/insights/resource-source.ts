// The one way report generation reads an environment: a listing of its resources, each opened
// on demand. Storage adapters, the file system (file-source.ts) and tests implement it.

export interface SourceResource {
  /** Path within the environment, with or without a leading "/". */
  path: string;
  /** Size of the contents in bytes. */
  size: number;
  /** Creation time, milliseconds since the Unix epoch. */
  created: number;
  /** Last modification time, milliseconds since the Unix epoch. */
  lastModified: number;
  /** The contents, in chunks. Called at most once per listing, and only for design resources. */
  open(): AsyncIterable<Uint8Array>;
  /** Base64 MD5 of the contents, when the source knows it without reading them (a comparison's key). */
  md5?: string;
  /** The resource's last promotion into this environment, if it was ever promoted. */
  promotion?: { date: string | number; by: string } | undefined;
}

export interface ResourceSource {
  /** Every file resource of the environment (directories left out), in any order. */
  list(): AsyncIterable<SourceResource>;
}
