// The development issuer: `trove serve` without --issuer issues its own tokens
// under /auth/ (discovery, JWKS, client credentials), keeps its credentials and
// key in the data directory, and `trove token` prints a token that works.

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DEV_ISSUER_FILE, type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { freePort } from "../support/child-server.js";
import { startServer, type TestServer } from "../support/server.js";
import { ADMIN, startIssuer } from "./support.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));

describe("development issuer, in process", () => {
  let dir: string;
  let issuer: DevIssuer;
  let t: TestServer;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-dev-issuer-"));
    issuer = await openDevIssuer({ dataDir: dir });
    t = await startServer({ auth: issuer.authenticator, devIssuer: issuer });
  });
  afterEach(async () => {
    await t.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const basic = (id: string, secret: string) => ({
    Authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`,
  });
  const tokenRequest = (headers: Record<string, string>, body: string) =>
    fetch(`${t.url}/auth/token`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
      body,
    });

  it("serves OpenID discovery and a JWKS without the private key", async () => {
    const doc = await (await fetch(`${t.url}/auth/.well-known/openid-configuration`)).json();
    expect(doc).toMatchObject({
      issuer: `${t.url}/auth`,
      token_endpoint: `${t.url}/auth/token`,
      jwks_uri: `${t.url}/auth/jwks`,
      grant_types_supported: ["client_credentials", "authorization_code", "refresh_token"],
    });
    const jwks = (await (await fetch(`${t.url}/auth/jwks`)).json()) as { keys: Array<Record<string, string>> };
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
    expect(jwks.keys[0]).not.toHaveProperty("d");
  });

  it("client credentials (HTTP Basic) give a 10-minute token with full grants that every operation accepts", async () => {
    const res = await tokenRequest(basic(issuer.clientId, issuer.clientSecret), "grant_type=client_credentials");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as { access_token: string; token_type: string; expires_in: number };
    expect(body).toMatchObject({ token_type: "Bearer", expires_in: 600 });
    const claims = decodeJwt(body.access_token);
    expect(claims).toMatchObject({ iss: `${t.url}/auth`, aud: "trove", sub: issuer.clientId, trove_account: "dev" });
    expect((claims.exp as number) - (claims.iat as number)).toBe(600);
    const auth = { Authorization: `Bearer ${body.access_token}` };
    expect(
      (await fetch(`${t.url}/resources/v2/data/home/a.txt`, { method: "PUT", body: "x", headers: auth })).status,
    ).toBe(201);
    const mk = await fetch(`${t.url}/resources/v2/stores`, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json" },
      body: '{"name":"brand"}',
    });
    expect(mk.status).toBe(201);
    expect((await fetch(`${t.url}/resources/v2/data/home/a.txt`)).status).toBe(401);
  });

  it("client credentials in the form body work too", async () => {
    const form = new URLSearchParams({
      grant_type: "client_credentials",
      client_id: issuer.clientId,
      client_secret: issuer.clientSecret,
    });
    expect((await tokenRequest({}, form.toString())).status).toBe(200);
  });

  it("a wrong secret is 401 invalid_client; another grant type is 400", async () => {
    const wrong = await tokenRequest(basic(issuer.clientId, "guess"), "grant_type=client_credentials");
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ error: "invalid_client" });
    const password = await tokenRequest(basic(issuer.clientId, issuer.clientSecret), "grant_type=password");
    expect(password.status).toBe(400);
    expect(await password.json()).toMatchObject({ error: "unsupported_grant_type" });
    const wrongMethod = await fetch(`${t.url}/auth/token`);
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("POST"); // RFC 9110: a 405 says what is allowed
    const postToJwks = await fetch(`${t.url}/auth/jwks`, { method: "POST" });
    expect(postToJwks.status).toBe(405);
    expect(postToJwks.headers.get("allow")).toBe("GET, HEAD");
  });

  it("keeps its credentials and signing key in the data directory, mode 0600, across restarts", async () => {
    const file = join(dir, DEV_ISSUER_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(await readFile(file, "utf8"));
    expect(stored).toMatchObject({ client_id: issuer.clientId, client_secret: issuer.clientSecret });
    const token = await issuer.issue();
    const again = await openDevIssuer({ dataDir: dir });
    again.listening("127.0.0.1", t.port);
    expect([again.clientId, again.clientSecret]).toEqual([issuer.clientId, issuer.clientSecret]);
    // A token of the first instance verifies with the reopened one: same key, same issuer.
    expect((await again.authenticator.authenticate(`Bearer ${token}`)).subject).toBe(issuer.clientId);
  });

  it("does not accept tokens of another issuer, even with the right claims", async () => {
    const external = await startIssuer();
    try {
      const res = await fetch(`${t.url}/resources/v2/data/home/`, {
        headers: { Authorization: `Bearer ${await external.token({ ...ADMIN, iss: issuer.issuer })}` },
      });
      expect(res.status).toBe(401);
    } finally {
      await external.stop();
    }
  });
});

/** `trove serve` from dist/ in a child process, with its stdout (pino) and stderr kept. */
async function serveChild(args: string[]): Promise<{
  url: string;
  dir: string;
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  stop(): Promise<void>;
}> {
  const dir = await mkdtemp(join(tmpdir(), "trove-cli-auth-"));
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, "serve", "--port", String(port), "--data", dir, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.setEncoding("utf8").on("data", (s: string) => {
    out += s;
  });
  child.stderr?.setEncoding("utf8").on("data", (s: string) => {
    err += s;
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  while (!/Trove \S+ listening on/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`trove serve did not start: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    dir,
    child,
    stdout: () => out,
    stderr: () => err,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

describe("trove serve and trove token (CLI, dist/)", () => {
  it("development mode: a loud warning, then `trove token` prints a token that a REST call accepts", async () => {
    const server = await serveChild(["--log-level", "info"]);
    try {
      // The banner is on stderr; it is written right after listening.
      for (let i = 0; i < 100 && !server.stderr().includes("client secret"); i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const banner = server.stderr();
      expect(banner).toContain("DEVELOPMENT MODE");
      const stored = JSON.parse(await readFile(join(server.dir, DEV_ISSUER_FILE), "utf8"));
      expect(banner).toContain(`client id      ${stored.client_id}`);
      expect(banner).toContain(`client secret  ${stored.client_secret}`);
      expect(banner).toContain(`$(npx trove token --url ${server.url} --data ${server.dir})`);

      const { stdout } = await promisify(execFile)(process.execPath, [
        CLI,
        "token",
        "--url",
        server.url,
        "--data",
        server.dir,
      ]);
      const token = stdout.trim();
      expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
      const res = await fetch(`${server.url}/resources/v2/stores`, { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('name="home"');
      expect((await fetch(`${server.url}/resources/v2/stores`)).status).toBe(401);

      // The request log (stdout, pino) never holds a secret.
      await new Promise((r) => setTimeout(r, 100));
      const log = server.stdout();
      expect(log).toContain('"url":"/auth/token"');
      expect(log).toContain(`"caller":"${stored.client_id}"`);
      expect(log).not.toContain(stored.client_secret);
      expect(log).not.toContain(token);
      expect(log.toLowerCase()).not.toContain("bearer");
    } finally {
      await server.stop();
    }
  });

  it("`trove token` explains what is wrong when there are no credentials", async () => {
    const dir = await mkdtemp(join(tmpdir(), "trove-cli-empty-"));
    try {
      const run = promisify(execFile)(process.execPath, [CLI, "token", "--data", dir, "--url", "http://127.0.0.1:9"]);
      // One `trove token` for both bins (the SDK's): no credentials is a usage mistake, exit 2.
      await expect(run).rejects.toMatchObject({
        code: 2,
        stderr: expect.stringContaining(`(no ${join(dir, DEV_ISSUER_FILE)})`),
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe("with --issuer", () => {
    let external: Awaited<ReturnType<typeof startIssuer>>;
    beforeAll(async () => {
      external = await startIssuer();
    });
    afterAll(async () => {
      await external.stop();
    });

    it("verifies the issuer's tokens, runs no development issuer and prints no warning", async () => {
      const server = await serveChild(["--issuer", external.url, "--audience", "trove", "--log-level", "info"]);
      try {
        const token = await external.token(ADMIN);
        const ok = await fetch(`${server.url}/resources/v2/data/home/`, {
          headers: { Authorization: `Bearer ${token}` },
        });
        expect(ok.status).toBe(200);
        expect((await fetch(`${server.url}/auth/.well-known/openid-configuration`)).status).toBe(401);
        expect(server.stderr()).not.toContain("DEVELOPMENT MODE");
        await expect(readFile(join(server.dir, DEV_ISSUER_FILE))).rejects.toMatchObject({ code: "ENOENT" });
      } finally {
        await server.stop();
      }
    });
  });

  it("trove --help and trove serve --help describe authentication", async () => {
    const help = await promisify(execFile)(process.execPath, [CLI, "--help"]);
    expect(help.stdout).toContain("token     print a bearer token");
    const serve = await promisify(execFile)(process.execPath, [CLI, "serve", "--help"]);
    expect(serve.stdout).toContain("--issuer URL");
    expect(serve.stdout).toContain("--audience AUD");
    const token = await promisify(execFile)(process.execPath, [CLI, "token", "--help"]);
    expect(token.stdout).toContain("Usage: trove token");
  });
});
