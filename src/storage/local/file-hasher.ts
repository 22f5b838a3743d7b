// The MD5 of a blob file computed on a worker thread, which reads back what the writer has
// written while the upload goes on: on the main thread MD5 cost about 1.4 ms of CPU per MiB and
// halved a 64 MiB PUT's throughput (docs/benchmarks.md, "Large bodies"). The worker reads the
// file through its own descriptor, by path, so that nothing it reads is memory the main thread
// uses or may reuse; the pages come from the page cache the writes just filled.

import { Worker } from "node:worker_threads";

/**
 * The worker's code, plain JavaScript (evaluated, so that it runs the same from dist/ and from
 * the TypeScript sources under test). One job per upload: `open` a file, `hash` it up to a
 * position (in the order asked), then `digest` (answers the MD5, base64) or `drop`.
 */
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { createHash } = require("node:crypto");
const { openSync, readSync, closeSync } = require("node:fs");
const buffer = Buffer.allocUnsafe(1024 * 1024);
const jobs = new Map();
function close(job) {
  if (job.fd === undefined) return;
  try { closeSync(job.fd); } catch {}
  job.fd = undefined;
}
parentPort.on("message", (m) => {
  if (m.op === "open") {
    const job = { fd: undefined, hash: createHash("md5"), position: 0, failed: undefined };
    jobs.set(m.job, job);
    try { job.fd = openSync(m.path, "r"); } catch (err) { job.failed = err; }
    return;
  }
  const job = jobs.get(m.job);
  if (m.op === "hash") {
    if (!job || job.failed) return;
    try {
      while (job.position < m.upTo) {
        const n = readSync(job.fd, buffer, 0, Math.min(buffer.length, m.upTo - job.position), job.position);
        if (n === 0) throw new Error("the file ends at " + job.position + " bytes, before " + m.upTo);
        job.hash.update(buffer.subarray(0, n));
        job.position += n;
      }
    } catch (err) {
      job.failed = err;
      close(job);
    }
    return;
  }
  jobs.delete(m.job);
  if (job) close(job);
  if (m.op !== "digest") return;
  if (!job || job.failed) {
    const err = job ? job.failed : new Error("no such job");
    parentPort.postMessage({ job: m.job, error: String(err && err.message), code: err && err.code });
    return;
  }
  parentPort.postMessage({ job: m.job, md5: job.hash.digest("base64"), size: job.position });
});
`;

interface Answer {
  job: number;
  md5?: string;
  size?: number;
  error?: string;
  code?: string;
}

/** One file's hashing: `upTo` as the file grows, then `digest` once, or `drop`. */
export interface FileHashJob {
  /** Hashes the file up to `position` (bytes), which the writer has written. */
  upTo(position: number): void;
  /** The MD5 (base64) of the file's first `size` bytes, all of them asked for with `upTo`. */
  digest(size: number): Promise<string>;
  /** Stops the job: the upload failed. */
  drop(): void;
}

/** A worker thread hashing files for the uploads of one process, in the order asked. */
export class FileHasher {
  private worker: Worker | undefined;
  private nextJob = 1;
  /** Jobs started and not yet digested or dropped: the worker keeps the process alive while any is. */
  private active = 0;
  private readonly waiting = new Map<
    number,
    { worker: Worker; resolve: (a: Answer) => void; reject: (err: Error) => void }
  >();

  /** Starts hashing the file at `path` (its writer has created it). */
  start(path: string): FileHashJob {
    const worker = this.running();
    const job = this.nextJob++;
    worker.postMessage({ op: "open", job, path });
    if (this.active++ === 0) worker.ref();
    let finished = false;
    const finish = () => {
      finished = true;
      if (--this.active === 0) worker.unref();
    };
    return {
      upTo: (position) => {
        if (!finished) worker.postMessage({ op: "hash", job, upTo: position });
      },
      digest: async (size) => {
        if (finished) throw new Error("a file hash job digested twice or after its drop");
        const answer = await new Promise<Answer>((resolve, reject) => {
          if (this.worker !== worker) {
            reject(new Error("the hashing worker stopped"));
            return;
          }
          this.waiting.set(job, { worker, resolve, reject });
          worker.postMessage({ op: "hash", job, upTo: size });
          worker.postMessage({ op: "digest", job });
        }).finally(finish);
        if (answer.md5 === undefined || answer.size !== size) {
          const err: NodeJS.ErrnoException = new Error(`hashing the blob file failed: ${answer.error ?? "short"}`);
          if (answer.code) err.code = answer.code;
          throw err;
        }
        return answer.md5;
      },
      drop: () => {
        if (finished) return;
        finish();
        worker.postMessage({ op: "drop", job });
      },
    };
  }

  /** Ends the worker (tests, shutdown); the next `start` starts another. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private running(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.unref();
    worker.on("message", (answer: Answer) => {
      const waiter = this.waiting.get(answer.job);
      this.waiting.delete(answer.job);
      waiter?.resolve(answer);
    });
    const failed = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const [job, waiter] of this.waiting) {
        if (waiter.worker !== worker) continue;
        this.waiting.delete(job);
        waiter.reject(err);
      }
    };
    worker.on("error", failed);
    worker.on("exit", (code) => failed(new Error(`the hashing worker exited (${code})`)));
    this.worker = worker;
    return worker;
  }
}
