// Uploads through the REST v2 PUT (a browser cannot stream a request body over Connect), with
// XMLHttpRequest for its upload progress, and the files of a dropped folder.

import { preconditionFor, type Seen, type WriteOutcome, writeOutcome } from "./lib/conflict.js";
import { restDataUrl } from "./lib/paths.js";

export interface PutOptions {
  store: string;
  path: string;
  body: Blob | string;
  token: string | undefined;
  seen: Seen | undefined;
  contentType?: string;
  onProgress?(sent: number, total: number): void;
  signal?: AbortSignal;
}

export function putResource(options: PutOptions): Promise<WriteOutcome> {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", restDataUrl(options.store, options.path));
    if (options.token) xhr.setRequestHeader("Authorization", `Bearer ${options.token}`);
    for (const [name, value] of Object.entries(preconditionFor(options.seen))) xhr.setRequestHeader(name, value);
    const type = options.contentType || (typeof options.body === "string" ? "" : options.body.type);
    if (type) xhr.setRequestHeader("Content-Type", type);
    xhr.upload.onprogress = (e) => options.onProgress?.(e.loaded, e.lengthComputable ? e.total : 0);
    xhr.onload = () => resolve(writeOutcome(xhr.status, xhr.getResponseHeader("ETag"), xhr.responseText, options.seen));
    xhr.onerror = () => resolve({ kind: "failed", message: "the connection failed" });
    xhr.onabort = () => resolve({ kind: "failed", message: "cancelled" });
    options.signal?.addEventListener("abort", () => xhr.abort());
    xhr.send(options.body);
  });
}

/** A file to upload and its path relative to the folder it was dropped in. */
export interface PickedFile {
  file: File;
  relativePath: string;
}

function readAll(reader: FileSystemDirectoryReader): Promise<FileSystemEntry[]> {
  return new Promise((resolve, reject) => {
    const all: FileSystemEntry[] = [];
    const next = () =>
      reader.readEntries((batch) => {
        if (batch.length === 0) resolve(all);
        else {
          all.push(...batch);
          next();
        }
      }, reject);
    next();
  });
}

async function walk(entry: FileSystemEntry, prefix: string, out: PickedFile[], dirs: string[]): Promise<void> {
  const path = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    out.push({ file, relativePath: path });
  } else if (entry.isDirectory) {
    dirs.push(path);
    for (const child of await readAll((entry as FileSystemDirectoryEntry).createReader()))
      await walk(child, path, out, dirs);
  }
}

/** The files (and folders, parents first) of a drop: folders are walked; plain files stand for themselves. */
export async function droppedFiles(data: DataTransfer): Promise<{ files: PickedFile[]; dirs: string[] }> {
  const files: PickedFile[] = [];
  const dirs: string[] = [];
  const entries = [...data.items]
    .filter((item) => item.kind === "file")
    .map((item) => ({ entry: item.webkitGetAsEntry?.() ?? null, file: item.getAsFile() }));
  for (const { entry, file } of entries) {
    if (entry) await walk(entry, "", files, dirs);
    else if (file) files.push({ file, relativePath: file.name });
  }
  return { files, dirs };
}

/** The files of an <input type=file> (with webkitdirectory, their relative paths) and the folders they need. */
export function pickedFiles(list: FileList): { files: PickedFile[]; dirs: string[] } {
  const files = [...list].map((file) => ({ file, relativePath: file.webkitRelativePath || file.name }));
  const dirs = new Set<string>();
  for (const { relativePath } of files) {
    const parts = relativePath.split("/").slice(0, -1);
    for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
  }
  return { files, dirs: [...dirs].sort((a, b) => a.split("/").length - b.split("/").length) };
}
