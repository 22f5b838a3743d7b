// What the limit suites observe of a running server: a condition that must come true, and the
// series of its Prometheus answer.

/** Waits until `check` holds: something that must happen; the bound only ends a failing run. */
export async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1500; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** One series of a Prometheus text answer (labels in the order the server writes them), 0 when absent. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const names = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const series = names === "" ? `${name} ` : `${name}{${names}} `;
  const line = text.split("\n").find((l) => l.startsWith(series));
  return line === undefined ? 0 : Number(line.slice(series.length));
}

/** GET /metrics. */
export async function scrape(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}
