// A MongoDB connection string as it may be shown (store settings, logs): parsed with the
// driver's own parser, every credential-bearing part replaced, never a guess by pattern.

import { CommaAndColonSeparatedRecord, ConnectionString } from "mongodb-connection-string-url";

export const REDACTED = "********";

/** Query options whose value is a secret, whatever their case (the driver reads them case-insensitively). */
const SECRET_OPTIONS = /password|secret|token|pwd|credential/i;
/** authMechanismProperties entries whose value is a secret (AWS_SESSION_TOKEN and the like). */
const SECRET_PROPERTIES = /token|secret|password|key|credential/i;

/**
 * The connection string with its password, secret options (tlsCertificateKeyFilePassword,
 * proxyPassword, sslPEMKeyPassword, …) and secret authMechanismProperties replaced by
 * `********`. The user name and hosts stay. A string that does not parse is not shown at all.
 */
export function redactConnectionUrl(url: string): string {
  let cs: ConnectionString;
  try {
    cs = new ConnectionString(url);
  } catch {
    return `${REDACTED} (not shown: it does not parse as a MongoDB connection string)`;
  }
  if (cs.password !== "") cs.password = REDACTED;
  for (const name of [...new Set(cs.searchParams.keys())]) {
    if (SECRET_OPTIONS.test(name)) {
      cs.searchParams.set(name, REDACTED);
    } else if (name.toLowerCase() === "authmechanismproperties") {
      const values = cs.searchParams.getAll(name).map((value) => {
        const props = new CommaAndColonSeparatedRecord(value);
        for (const key of [...props.keys()]) if (SECRET_PROPERTIES.test(key)) props.set(key, REDACTED);
        return props.toString();
      });
      cs.searchParams.delete(name);
      for (const value of values) cs.searchParams.append(name, value);
    }
  }
  return cs.toString();
}

/** The user name and whether a password is set (multi-host strings are not WHATWG URLs). */
export function connectionUser(url: string): { username: string; hasPassword: boolean } | undefined {
  try {
    const cs = new ConnectionString(url);
    return { username: decodeURIComponent(cs.username), hasPassword: cs.password !== "" };
  } catch {
    return undefined;
  }
}
