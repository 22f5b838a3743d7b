// How sizes and times read in the console.

/** 0 B, 512 B, 1.5 KiB, 20 MiB: binary units, one decimal under 10. */
export function formatSize(bytes: number | bigint): string {
  let n = Number(bytes);
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let unit = -1;
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024;
    unit++;
  }
  return `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[unit]}`;
}

const pad = (n: number) => String(n).padStart(2, "0");

function dateOf(millis: number | bigint): Date | undefined {
  const d = new Date(Number(millis));
  return Number(millis) === 0 || Number.isNaN(d.getTime()) ? undefined : d;
}

const day = (d: Date) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;

/** A time as YYYY-MM-DD HH:MM:SS in the browser's zone (sortable, unambiguous). */
export function formatTime(millis: number | bigint): string {
  const d = dateOf(millis);
  return d ? `${day(d)} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` : "";
}

/**
 * The same time in at most 10 characters, for the listing's narrow column: HH:MM when it is
 * today (in the browser's zone), else YYYY-MM-DD. The listing gives the full time as a tooltip.
 */
export function formatShortTime(millis: number | bigint, now: number = Date.now()): string {
  const d = dateOf(millis);
  if (!d) return "";
  return day(d) === day(new Date(now)) ? `${pad(d.getHours())}:${pad(d.getMinutes())}` : day(d);
}
