// Read buffers that a blob's reader lends to its consumer, and that the consumer may give back
// once nothing reads them any more, so that a large GET reads into the same few buffers instead
// of a new one per chunk: each new buffer is memory outside V8's heap, and every few tens of MiB
// of it start a full mark-compact of the heap ("external memory pressure"), which took about half
// of the server's CPU under a 64 MiB GET load (docs/benchmarks.md, "Large bodies").
//
// Ownership: a chunk a reader yields belongs to its consumer. A consumer that never gives it back
// (a promotion keeps it in a write batch, a report reads it) keeps its bytes for as long as it
// holds it, and the garbage collector frees it, as for any buffer. A consumer that gives it back
// declares that nothing, native writes included, reads it any more: a socket write's callback has
// fired (HTTP/1.1), or connect has serialized (copied) the message that carried it (the RPC
// faces, src/rpc/connect-routes.ts). Giving back detaches the chunk's memory from every view of it
// (a transfer, as `postMessage` does, without a copy), so that a view someone kept anyway reads
// as empty: it can never show the bytes of the next blob read into that memory. Only chunks this
// pool lent, and each once, are taken back; anything else given back is left alone.

/** What a pool did since it was made: for tests and diagnostics. */
export interface ChunkPoolStats {
  /** Buffers allocated because none was free. */
  allocated: number;
  /** Takes answered with a buffer given back before. */
  reused: number;
  /** Chunks lent and not given back (yet, or ever: a consumer need not give back). */
  lent: number;
  /** Buffers kept for the next take. */
  free: number;
}

/** The pool that lent each chunk still lent. */
const lenders = new WeakMap<Uint8Array, ChunkPool>();

export class ChunkPool {
  private readonly buffers: ArrayBuffer[] = [];
  private allocated = 0;
  private reused = 0;
  private lentCount = 0;

  /**
   * `size`: the length of every buffer, the largest take; `keep`: how many free buffers are kept
   * (the memory a pool holds while idle is at most `size * keep`).
   */
  constructor(
    readonly size: number,
    readonly keep: number,
  ) {}

  /** A buffer of `length` bytes (at most `size`), the caller's alone until it lends or recycles it. */
  take(length: number): Buffer {
    if (length > this.size) throw new RangeError(`a take of ${length} bytes from a pool of ${this.size}-byte buffers`);
    let memory = this.buffers.pop();
    if (memory) this.reused++;
    else {
      memory = new ArrayBuffer(this.size);
      this.allocated++;
    }
    return Buffer.from(memory, 0, length);
  }

  /** Hands `chunk` (a view of a buffer taken from this pool) to a consumer, who may give it back. */
  lend(chunk: Buffer): Buffer {
    lenders.set(chunk, this);
    this.lentCount++;
    return chunk;
  }

  /** Takes back a buffer that the taker never lent (a read ahead that was not consumed). */
  recycle(buffer: Buffer): void {
    if (lenders.has(buffer)) throw new Error("a lent chunk comes back through giveBack");
    this.keepMemory(buffer);
  }

  /** `giveBack` for a chunk this pool lent. */
  takeBack(chunk: Uint8Array): void {
    lenders.delete(chunk);
    this.lentCount--;
    this.keepMemory(chunk);
  }

  stats(): ChunkPoolStats {
    return { allocated: this.allocated, reused: this.reused, lent: this.lentCount, free: this.buffers.length };
  }

  private keepMemory(view: Uint8Array): void {
    const memory = view.buffer;
    if (!(memory instanceof ArrayBuffer) || memory.byteLength !== this.size) return;
    // Detached: every view of it, this one included, now has no bytes.
    const moved = structuredClone(memory, { transfer: [memory] });
    if (this.buffers.length < this.keep) this.buffers.push(moved);
  }
}

/**
 * Declares that nothing reads `chunk` any more (its socket write's callback has fired). A chunk a
 * blob reader lent goes back to its pool, detached from every view of it; any other chunk, or one
 * given back before, is left as it is.
 */
export function giveBack(chunk: Uint8Array): void {
  lenders.get(chunk)?.takeBack(chunk);
}

/** Whether `chunk` was lent by a pool and not given back yet. */
export function isLent(chunk: Uint8Array): boolean {
  return lenders.has(chunk);
}
