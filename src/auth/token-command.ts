// `trove token`: asks a server's development issuer for a token with the client
// credentials kept in the data directory, and prints it for scripts and curl.

import { join } from "node:path";
import { parseArgs } from "node:util";
import { DEV_ISSUER_FILE, readDevCredentials } from "./dev-issuer.js";

export const TOKEN_HELP = `Usage: trove token [options]

Prints a bearer token from the development issuer of a running \`trove serve\`
(one started without --issuer), with full access, valid 10 minutes by default:

  curl -H "Authorization: Bearer $(npx trove token)" http://127.0.0.1:13242/resources/v2/stores

Options:
  --url URL     the server                       (TROVE_URL, default http://127.0.0.1:13242)
  --data DIR    its data directory, which holds the client credentials
                                                 (TROVE_DATA, default ./.trove-data)
  -h, --help    show this help

With a real issuer, get tokens from that issuer instead (docs/auth.md).
`;

export interface TokenConfig {
  url: string;
  dataDir: string;
}

export function parseTokenArgs(args: string[], env: NodeJS.ProcessEnv): TokenConfig | "help" {
  const { values } = parseArgs({
    args,
    options: {
      url: { type: "string" },
      data: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  const url = (values.url ?? env.TROVE_URL ?? "http://127.0.0.1:13242").replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+$/.test(url)) throw new Error(`--url must be a server address such as http://127.0.0.1:13242`);
  return { url, dataDir: values.data ?? env.TROVE_DATA ?? ".trove-data" };
}

/** A token from the development issuer at `url`, authenticated with the credentials in `dataDir`. */
export async function fetchDevToken(config: TokenConfig): Promise<string> {
  let credentials: { clientId: string; clientSecret: string };
  try {
    credentials = await readDevCredentials(config.dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    throw new Error(
      `no development issuer credentials in ${join(config.dataDir, DEV_ISSUER_FILE)}: ` +
        "start `trove serve` without --issuer first, or give its --data directory",
    );
  }
  const basic = Buffer.from(
    `${encodeURIComponent(credentials.clientId)}:${encodeURIComponent(credentials.clientSecret)}`,
  ).toString("base64");
  let res: Response;
  try {
    res = await fetch(`${config.url}/auth/token`, {
      method: "POST",
      headers: { Authorization: `Basic ${basic}`, "Content-Type": "application/x-www-form-urlencoded" },
      body: "grant_type=client_credentials",
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    throw new Error(`cannot reach ${config.url}: ${(err as Error).cause ?? (err as Error).message}`);
  }
  const body = (await res.json().catch(() => ({}))) as { access_token?: unknown; error?: unknown };
  if (res.status === 200 && typeof body.access_token === "string") return body.access_token;
  if (res.status === 401) {
    throw new Error(
      `${config.url} refused the credentials of ${config.dataDir}: is it the data directory of that server?`,
    );
  }
  throw new Error(
    `${config.url}/auth/token answered ${res.status}${typeof body.error === "string" ? ` (${body.error})` : ""}: ` +
      "is that server running in development mode (without --issuer)?",
  );
}
