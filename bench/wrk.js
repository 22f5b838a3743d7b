// Load from wrk (Debian package `wrk`), the generator issue 14's figures were taken with: one
// thread, C connections, a Lua script for the method, headers, body and (for PUTs of new
// resources) a path of its own per request. wrk runs in its own process, in C: the load
// generator costs far less CPU than autocannon, which runs in the benchmark's own Node process.
// HEAD is the exception: wrk (like autocannon) waits for the body a HEAD answer's Content-Length
// announces and never counts the answer, so HEAD is measured with ApacheBench (`ab -i -k`, from
// apache2-utils, installed with apache2), also one process in C.

import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Whether wrk is installed. */
export function wrkAvailable() {
  try {
    execFileSync("wrk", ["--version"], { stdio: "ignore" });
    return true;
  } catch (err) {
    // wrk --version exits 1 after printing its version.
    return err.status === 1;
  }
}

const lua = (s) => JSON.stringify(s); // a JSON string of ASCII is a valid Lua string literal

function script({ method = "GET", headers = {}, bodyFile, uniquePrefix }) {
  const lines = [`wrk.method = ${lua(method)}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`wrk.headers[${lua(name)}] = ${lua(value)}`);
  if (bodyFile) lines.push(`local f = io.open(${lua(bodyFile)}, "rb")`, "wrk.body = f:read('*a')", "f:close()");
  if (uniquePrefix) {
    // A new resource per request: PUT {prefix}{thread-unique counter}.bin.
    lines.push(
      "local n = 0",
      `request = function() n = n + 1; return wrk.format(nil, ${lua(uniquePrefix)} .. n .. ".bin") end`,
    );
  }
  return `${lines.join("\n")}\n`;
}

function millis(text) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!m) return Number.NaN;
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[m[2]];
}

/** Parses wrk's report: requests/s counting only 2xx/3xx answers, p50/p99 in ms, errors. */
export function parseWrk(output) {
  const total = Number(/(\d+) requests in ([\d.]+)(\w+)/.exec(output)?.[1] ?? 0);
  const seconds = millis(/requests in ([\d.]+\w+)/.exec(output)?.[1] ?? "0s") / 1000;
  const bad = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0);
  const socket = /Socket errors: (.*)/.exec(output)?.[1];
  const p = (q) => millis(new RegExp(`^\\s+${q}%\\s+(\\S+)`, "m").exec(output)?.[1] ?? "");
  const other = [bad ? `${bad} non-2xx/3xx` : "", socket ? `socket errors: ${socket}` : ""].filter(Boolean).join(" ");
  return { rps: (total - bad) / seconds, p50: p(50), p99: p(99), other };
}

/**
 * One wrk run against `url` (the full URL of the first request) for `seconds`:
 * { rps, p50, p99, other }. `request`: { method, headers, body (Buffer), uniquePrefix }; `timeout`:
 * seconds wrk waits for an answer (default 2).
 */
export async function wrkLoad(url, request, seconds, connections, { timeout } = {}) {
  if (request.method === "HEAD") return abHead(url, request, seconds, connections);
  const dir = mkdtempSync(join(tmpdir(), "trove-wrk-"));
  try {
    let bodyFile;
    if (request.body) {
      bodyFile = join(dir, "body");
      writeFileSync(bodyFile, request.body);
    }
    const file = join(dir, "script.lua");
    writeFileSync(file, script({ ...request, bodyFile }));
    const args = ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency", "-s", file, url];
    // wrk gives up on an answer after 2 s by default: a long listing may take longer.
    if (timeout !== undefined) args.splice(3, 0, "--timeout", `${timeout}s`);
    const output = await new Promise((resolve, reject) =>
      execFile("wrk", args, { encoding: "utf8" }, (err, stdout, stderr) =>
        err ? reject(new Error(`wrk failed: ${stderr || err.message}`)) : resolve(stdout),
      ),
    );
    return parseWrk(output);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Parses ab's report: requests/s of answers that were not failures, p50/p99 in ms. */
export function parseAb(output) {
  const complete = Number(/Complete requests:\s+(\d+)/.exec(output)?.[1] ?? 0);
  const failed = Number(/Failed requests:\s+(\d+)/.exec(output)?.[1] ?? 0);
  const non2xx = Number(/Non-2xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0);
  const seconds = Number(/Time taken for tests:\s+([\d.]+) seconds/.exec(output)?.[1] ?? Number.NaN);
  const p = (q) => Number(new RegExp(`^\\s+${q}%\\s+(\\d+)`, "m").exec(output)?.[1] ?? Number.NaN);
  const other = [failed ? `${failed} failed` : "", non2xx ? `${non2xx} non-2xx` : ""].filter(Boolean).join(" ");
  return { rps: (complete - failed - non2xx) / seconds, p50: p(50), p99: p(99), other };
}

/** HEAD load from ab: keep-alive, `connections` concurrent, for `seconds`. */
async function abHead(url, request, seconds, connections) {
  const args = ["-k", "-i", "-q", "-c", String(connections), "-t", String(seconds), "-n", "100000000"];
  for (const [name, value] of Object.entries(request.headers ?? {})) args.push("-H", `${name}: ${value}`);
  args.push(url);
  const output = await new Promise((resolve, reject) =>
    execFile("ab", args, { encoding: "utf8", maxBuffer: 1 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`ab failed: ${stderr || err.message}`)) : resolve(stdout),
    ),
  );
  return parseAb(output);
}
