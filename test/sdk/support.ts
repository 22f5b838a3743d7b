// Shared pieces of the SDK suites: a server with its development issuer (a real
// client-credentials token endpoint), a fetch that counts token requests, and a rejection helper.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

export interface DevServer extends TestServer {
  clientId: string;
  clientSecret: string;
  tokenUrl: string;
  /** The data directory holding dev-issuer.json. */
  issuerDir: string;
}

/** A server that accepts only tokens of its development issuer, served under /auth/. */
export async function startDevServer(options: { pollWait?: number } = {}): Promise<DevServer> {
  const issuerDir = await mkdtemp(join(tmpdir(), "trove-sdk-issuer-"));
  const issuer = await openDevIssuer({ dataDir: issuerDir });
  const server = await startServer({ auth: issuer.authenticator, devIssuer: issuer, ...options });
  return {
    ...server,
    clientId: issuer.clientId,
    clientSecret: issuer.clientSecret,
    tokenUrl: `${server.url}/auth/token`,
    issuerDir,
    async stop() {
      await server.stop();
      await rm(issuerDir, { recursive: true, force: true });
    },
  };
}

/** fetch that counts the requests whose URL ends with /token. */
export function countingFetch(): { fetch: typeof fetch; tokenRequests: () => number } {
  let count = 0;
  return {
    fetch: (input, init) => {
      if (String(input instanceof Request ? input.url : input).endsWith("/token")) count += 1;
      return fetch(input, init);
    },
    tokenRequests: () => count,
  };
}

export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("the call succeeded");
}
