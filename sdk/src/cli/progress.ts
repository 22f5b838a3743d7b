// A one-line progress bar on stderr for long transfers and mirrors. It draws only
// on a terminal, and only once the work has taken longer than half a second.

export interface Progress {
  update(done: number, total?: number, note?: string): void;
  finish(): void;
}

const SILENT: Progress = { update() {}, finish() {} };

/** A size in binary units ("4.0 KiB"), bytes below 1 KiB ("13 B"). */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** A remaining time as "42s", "3m05s" or "2h07m". */
export function duration(seconds: number): string {
  const s = Math.ceil(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function createProgress(
  label: string,
  options: { stream?: NodeJS.WriteStream; enabled: boolean; unit?: "bytes" | "count"; now?: () => number },
): Progress {
  const stream = options.stream ?? process.stderr;
  if (!options.enabled || !stream.isTTY) return SILENT;
  const now = options.now ?? Date.now;
  const started = now();
  let lastDraw = 0;
  let drawn = false;
  const fmt = options.unit === "count" ? (n: number) => String(n) : bytes;
  return {
    update(done, total, note) {
      const t = now();
      if (t - started < 500 || t - lastDraw < 100) return;
      lastDraw = t;
      drawn = true;
      const width = 24;
      let bar = "";
      if (total !== undefined && total > 0) {
        const filled = Math.min(width, Math.round((done / total) * width));
        bar = `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${Math.floor((done / total) * 100)}% `;
      }
      const perSecond = done / ((t - started) / 1000);
      const rate = options.unit === "count" ? "" : ` ${bytes(Math.round(perSecond))}/s`;
      const eta =
        total !== undefined && total > done && perSecond > 0 ? ` ETA ${duration((total - done) / perSecond)}` : "";
      const amount = total !== undefined ? `${fmt(done)}/${fmt(total)}` : fmt(done);
      const line = `${label} ${bar}${amount}${rate}${eta}${note ? ` ${note}` : ""}`;
      stream.write(`\r${line.slice(0, (stream.columns ?? 80) - 1)}\x1b[K`);
    },
    finish() {
      if (drawn) stream.write("\r\x1b[K");
    },
  };
}
