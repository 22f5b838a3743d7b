// Files of JSON lines written and read a piece at a time: the plan of a push or pull, its
// deletions and the local state are as long as the tree, so they live on disk, not in memory
// (issue 31: the client's memory stays flat whatever the tree's size). Synchronous calls on
// local files, in pieces of 64 KiB.

import { closeSync, openSync, readSync, writeSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";

const PIECE = 64 * 1024;

/** Writes lines to a file opened here, `PIECE` at a time. */
export class LineWriter {
  private readonly fd: number;
  private text = "";
  lines = 0;

  /** `flags` "wx" (the default) refuses a file that exists. */
  constructor(file: string, mode = 0o600, flags = "wx") {
    this.fd = openSync(file, flags, mode);
  }

  write(value: unknown): void {
    this.text += `${JSON.stringify(value)}\n`;
    this.lines += 1;
    if (this.text.length >= PIECE) this.flush();
  }

  private flush(): void {
    if (this.text !== "") writeSync(this.fd, this.text);
    this.text = "";
  }

  /** Writes what is left and closes the file. */
  close(): void {
    try {
      this.flush();
    } finally {
      closeSync(this.fd);
    }
  }

  /** Closes the file without writing what is left (it is being thrown away). */
  discard(): void {
    closeSync(this.fd);
  }
}

/** The lines of a file, each parsed as JSON, read `PIECE` at a time. */
export function* readLines(file: string): Generator<unknown> {
  const fd = openSync(file, "r");
  try {
    const buffer = Buffer.allocUnsafe(PIECE);
    const decoder = new StringDecoder("utf8");
    let rest = "";
    for (;;) {
      const n = readSync(fd, buffer, 0, PIECE, null);
      const text = rest + (n > 0 ? decoder.write(buffer.subarray(0, n)) : decoder.end());
      const lines = text.split("\n");
      rest = lines.pop() ?? "";
      for (const line of lines) if (line !== "") yield JSON.parse(line);
      if (n === 0) break;
    }
    if (rest !== "") yield JSON.parse(rest);
  } finally {
    closeSync(fd);
  }
}
