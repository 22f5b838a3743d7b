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

/** A time as YYYY-MM-DD HH:MM:SS in the browser's zone (sortable, unambiguous). */
export function formatTime(millis: number | bigint): string {
  const d = new Date(Number(millis));
  if (Number(millis) === 0 || Number.isNaN(d.getTime())) return "";
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
