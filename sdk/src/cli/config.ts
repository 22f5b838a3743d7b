// Where the CLI finds its server and credentials: flags, then environment
// variables, then a JSON config file, then defaults.

import { access, readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { clientCredentials, DEV_ISSUER_FILE, devIssuer, staticToken, type TokenProvider } from "../auth.js";
import type { ApiVersion } from "../rest/client.js";

export interface CliConfig {
  url: string;
  token?: string;
  clientId?: string;
  clientSecret?: string;
  tokenUrl?: string;
  issuer?: string;
  scope?: string;
  audience?: string;
  /** Data directory of a local development server (its dev-issuer.json gives tokens). */
  data: string;
  /** The REST API version the commands speak: 2 (default) or 1 (docs/rest.md, "Version 1"). */
  apiVersion: ApiVersion;
}

const KEYS = [
  "url",
  "token",
  "clientId",
  "clientSecret",
  "tokenUrl",
  "issuer",
  "scope",
  "audience",
  "data",
  "apiVersion",
] as const;
type Key = (typeof KEYS)[number];

const ENV: Record<Key, string> = {
  url: "TROVE_URL",
  token: "TROVE_TOKEN",
  clientId: "TROVE_CLIENT_ID",
  clientSecret: "TROVE_CLIENT_SECRET",
  tokenUrl: "TROVE_TOKEN_URL",
  issuer: "TROVE_ISSUER",
  scope: "TROVE_SCOPE",
  audience: "TROVE_AUDIENCE",
  data: "TROVE_DATA",
  apiVersion: "TROVE_API_VERSION",
};

/** The flag of each key, as the global options spell it. */
export const FLAGS: Record<Key, string> = {
  url: "url",
  token: "token",
  clientId: "client-id",
  clientSecret: "client-secret",
  tokenUrl: "token-url",
  issuer: "issuer",
  scope: "scope",
  audience: "audience",
  data: "data",
  apiVersion: "api-version",
};

export class UsageError extends Error {
  override name = "UsageError";
}

export function defaultConfigFile(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "trove", "config.json");
}

async function readConfigFile(file: string, required: boolean): Promise<Partial<Record<Key, string>>> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if (!required && (err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new UsageError(`cannot read the config file ${file}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`the config file ${file} is not JSON: ${(err as Error).message}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new UsageError(`the config file ${file} must hold a JSON object`);
  }
  const out: Partial<Record<Key, string>> = {};
  for (const [k, v] of Object.entries(doc)) {
    if (!(KEYS as readonly string[]).includes(k)) {
      throw new UsageError(`unknown key ${JSON.stringify(k)} in ${file} (known: ${KEYS.join(", ")})`);
    }
    if (typeof v !== "string") throw new UsageError(`${k} in ${file} must be a string`);
    out[k as Key] = v;
  }
  return out;
}

export async function resolveConfig(flags: Record<string, unknown>, env: NodeJS.ProcessEnv): Promise<CliConfig> {
  const configFlag = typeof flags.config === "string" ? flags.config : env.TROVE_CONFIG;
  const file = await readConfigFile(configFlag ?? defaultConfigFile(env), configFlag !== undefined);
  const pick = (k: Key): string | undefined => {
    const flag = flags[FLAGS[k]];
    if (typeof flag === "string") return flag;
    return env[ENV[k]] || file[k];
  };
  const url = (pick("url") ?? "http://127.0.0.1:13242").replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+(\/.*)?$/.test(url))
    throw new UsageError(`--url must be an address such as http://127.0.0.1:13242`);
  const apiVersion = pick("apiVersion") ?? "2";
  if (apiVersion !== "1" && apiVersion !== "2") {
    throw new UsageError(`--api-version must be 1 or 2, not ${JSON.stringify(apiVersion)}`);
  }
  const config: CliConfig = { url, data: pick("data") ?? ".trove-data", apiVersion: apiVersion === "1" ? 1 : 2 };
  for (const k of KEYS) {
    if (k === "url" || k === "data" || k === "apiVersion") continue;
    const v = pick(k);
    if (v !== undefined) config[k] = v;
  }
  return config;
}

/**
 * The credentials to use: a token; else client credentials (token endpoint from --token-url,
 * --issuer's discovery, or the server's development issuer at {url}/auth/token); else the
 * development issuer's credentials in the data directory; else none.
 */
export async function tokenProviderOf(config: CliConfig): Promise<TokenProvider | undefined> {
  if (config.token) return staticToken(config.token);
  if (config.clientId || config.clientSecret) {
    if (!config.clientId || !config.clientSecret) {
      throw new UsageError("client credentials need both --client-id and --client-secret");
    }
    return clientCredentials({
      tokenUrl: config.tokenUrl ?? (config.issuer ? undefined : `${config.url}/auth/token`),
      issuer: config.issuer,
      clientId: config.clientId,
      clientSecret: config.clientSecret,
      scope: config.scope,
      audience: config.audience,
    });
  }
  const file = join(config.data, DEV_ISSUER_FILE);
  if (
    await access(file).then(
      () => true,
      () => false,
    )
  ) {
    return devIssuer({ baseUrl: config.url, dataDir: config.data });
  }
  return undefined;
}

/** A command's STORE/PATH argument: "home" or "home/" is the root of store home. */
export function address(arg: string | undefined, what = "an address STORE/PATH"): { store: string; path: string } {
  if (!arg) throw new UsageError(`missing ${what}`);
  const slash = arg.indexOf("/");
  const store = slash < 0 ? arg : arg.slice(0, slash);
  const path = slash < 0 ? "" : arg.slice(slash + 1);
  if (store === "") throw new UsageError(`${JSON.stringify(arg)} names no store: write STORE/PATH`);
  return { store, path };
}
