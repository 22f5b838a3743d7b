// The console's own logic, without a browser: PKCE, token renewal timing, listing sort, paths and
// breadcrumbs, the write preconditions and conflicts, the virtual list's window.

import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { discoveryUrl, onOrigin } from "../../console/src/auth/issuer.js";
import { authorizationUrl, base64url, challengeOf, isVerifier, randomToken } from "../../console/src/auth/pkce.js";
import {
  isExpired,
  jwtExpiry,
  pastedTokenSet,
  renewalDelay,
  tokenSetOf,
  userNameOf,
} from "../../console/src/auth/renewal.js";
import { overwriteSeen, preconditionFor, writeOutcome } from "../../console/src/lib/conflict.js";
import { formatSize } from "../../console/src/lib/format.js";
import { kindOfReportType, reportTypeLabel, typeLabel } from "../../console/src/lib/kinds.js";
import { diffLines, sideBySide, splitLines } from "../../console/src/lib/line-diff.js";
import {
  ancestors,
  asOfHref,
  asOfOf,
  breadcrumbs,
  browseHref,
  momentOfLocal,
  nameProblem,
  parentPath,
  parseBrowseHref,
  restDataUrl,
} from "../../console/src/lib/paths.js";
import { ariaSort, nextSort, type Sortable, sortListing } from "../../console/src/lib/sort.js";
import { scrollToRow, visibleRows } from "../../console/src/lib/virtual.js";

describe("PKCE", () => {
  it("a verifier is 43 unreserved characters and its challenge is BASE64URL(SHA-256)", async () => {
    const verifier = randomToken(32);
    expect(verifier).toHaveLength(43);
    expect(isVerifier(verifier)).toBe(true);
    expect(await challengeOf(verifier)).toBe(createHash("sha256").update(verifier).digest("base64url"));
    expect(randomToken(32)).not.toBe(verifier);
  });

  it("RFC 7636 appendix B's example", async () => {
    expect(await challengeOf("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")).toBe(
      "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    );
    expect(base64url(new Uint8Array([251, 255]))).toBe("-_8");
    expect(isVerifier("short")).toBe(false);
    expect(isVerifier(`${"a".repeat(42)}/`)).toBe(false);
  });

  it("the authorization URL carries the code flow's parameters and keeps the endpoint's own query", () => {
    const url = new URL(
      authorizationUrl({
        authorizationEndpoint: "https://id.example.com/auth?kc_idp_hint=x",
        clientId: "trove-console",
        redirectUri: "http://127.0.0.1:13242/console/",
        state: "st",
        challenge: "ch",
        scope: "openid",
      }),
    );
    expect(Object.fromEntries(url.searchParams)).toEqual({
      kc_idp_hint: "x",
      response_type: "code",
      client_id: "trove-console",
      redirect_uri: "http://127.0.0.1:13242/console/",
      state: "st",
      code_challenge: "ch",
      code_challenge_method: "S256",
      scope: "openid",
    });
  });

  it("the development issuer's endpoints are used on the page's origin", () => {
    expect(onOrigin("http://127.0.0.1:13242/auth/token", "http://localhost:13242")).toBe(
      "http://localhost:13242/auth/token",
    );
    expect(discoveryUrl({ devIssuer: true, issuer: null }, "http://localhost:1")).toBe(
      "http://localhost:1/auth/.well-known/openid-configuration",
    );
    expect(discoveryUrl({ devIssuer: false, issuer: "https://kc.example/realms/d/" }, "http://x")).toBe(
      "https://kc.example/realms/d/.well-known/openid-configuration",
    );
  });
});

describe("token renewal", () => {
  const jwt = (claims: object) => `h.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.s`;

  it("a 10-minute token is renewed 2 minutes before it expires; a 60 s one 12 s before; never later than 10 s", () => {
    expect(renewalDelay({ obtainedAt: 0, expiresAt: 600_000 }, 0)).toBe(480_000);
    expect(renewalDelay({ obtainedAt: 0, expiresAt: 60_000 }, 0)).toBe(48_000);
    expect(renewalDelay({ obtainedAt: 0, expiresAt: 20_000 }, 0)).toBe(10_000);
    expect(renewalDelay({ obtainedAt: 0, expiresAt: 3_600_000 }, 0)).toBe(3_480_000);
    // Already past the renewal point: now.
    expect(renewalDelay({ obtainedAt: 0, expiresAt: 600_000 }, 590_000)).toBe(0);
  });

  it("expiry with a skew", () => {
    expect(isExpired({ expiresAt: 10_000 }, 4_000)).toBe(false);
    expect(isExpired({ expiresAt: 10_000 }, 5_000)).toBe(true);
  });

  it("a token endpoint's answer, and a pasted JWT by its exp", () => {
    expect(tokenSetOf({ access_token: "a", refresh_token: "r", expires_in: 600 }, 1000)).toEqual({
      accessToken: "a",
      refreshToken: "r",
      obtainedAt: 1000,
      expiresAt: 601_000,
      source: "flow",
    });
    expect(() => tokenSetOf({}, 0)).toThrow("no access_token");
    const token = jwt({ exp: 2000 });
    expect(jwtExpiry(token)).toBe(2_000_000);
    expect(pastedTokenSet(`Bearer ${token}\n`, 1_000_000)).toMatchObject({
      accessToken: token,
      expiresAt: 2_000_000,
      source: "pasted",
    });
    expect(() => pastedTokenSet(token, 2_000_000)).toThrow("expired");
    expect(() => pastedTokenSet("two words", 0)).toThrow("printable");
    expect(pastedTokenSet("opaque", 0).expiresAt).toBe(600_000);
  });
});

describe("listing sort", () => {
  const e = (name: string, over: Partial<Sortable> = {}): Sortable => ({
    name,
    directory: false,
    deleted: false,
    type: "text/plain",
    size: 0n,
    lastModifiedMillis: 0n,
    tag: "",
    md5: "",
    ...over,
  });
  const names = (list: Sortable[]) => list.map((x) => x.name);

  it("directories first, then names as people read them", () => {
    const list = [e("file10"), e("b", { directory: true }), e("file2"), e("A", { directory: true }), e("File1")];
    expect(names(sortListing(list, { key: "name", direction: "asc" }))).toEqual(["A", "b", "File1", "file2", "file10"]);
    expect(names(sortListing(list, { key: "name", direction: "desc" }))).toEqual([
      "b",
      "A",
      "file10",
      "file2",
      "File1",
    ]);
  });

  it("by size and last modified (bigints), ties by name", () => {
    const list = [e("c", { size: 10n }), e("a", { size: 2n }), e("b", { size: 10n })];
    expect(names(sortListing(list, { key: "size", direction: "asc" }))).toEqual(["a", "b", "c"]);
    expect(names(sortListing(list, { key: "size", direction: "desc" }))).toEqual(["b", "c", "a"]);
    const times = [e("x", { lastModifiedMillis: 5n }), e("y", { lastModifiedMillis: 1n })];
    expect(names(sortListing(times, { key: "modified", direction: "asc" }))).toEqual(["y", "x"]);
  });

  it("a click flips the column or starts another ascending; aria-sort says which", () => {
    expect(nextSort({ key: "name", direction: "asc" }, "name")).toEqual({ key: "name", direction: "desc" });
    expect(nextSort({ key: "name", direction: "desc" }, "size")).toEqual({ key: "size", direction: "asc" });
    expect(ariaSort({ key: "size", direction: "desc" }, "size")).toBe("descending");
    expect(ariaSort({ key: "size", direction: "desc" }, "name")).toBe("none");
  });

  it("sorts 10,000 entries without touching the input", () => {
    const list = Array.from({ length: 10_000 }, (_, i) => e(`f${(i * 7919) % 10_000}`));
    const sorted = sortListing(list, { key: "name", direction: "asc" });
    expect(sorted[0]?.name).toBe("f0");
    expect(sorted[9999]?.name).toBe("f9999");
    expect(list[1]?.name).toBe("f7919");
  });
});

describe("paths and breadcrumbs", () => {
  it("breadcrumbs from the stores to the open directory, the last one current", () => {
    expect(breadcrumbs("brand", "letters/2024")).toEqual([
      { label: "Stores", href: "/console/", current: false },
      { label: "brand", href: "/console/browse/brand/", current: false },
      { label: "letters", href: "/console/browse/brand/letters", current: false },
      { label: "2024", href: "/console/browse/brand/letters/2024", current: true },
    ]);
    expect(breadcrumbs("brand", "").at(-1)).toEqual({ label: "brand", href: "/console/browse/brand/", current: true });
  });

  it("console URLs escape each segment and read back", () => {
    const href = browseHref("my store", "a b/c#d/%e");
    expect(href).toBe("/console/browse/my%20store/a%20b/c%23d/%25e");
    expect(parseBrowseHref(href)).toEqual({ store: "my store", path: "a b/c#d/%e" });
    expect(parseBrowseHref("/console/browse/home/")).toEqual({ store: "home", path: "" });
    expect(parseBrowseHref("/console/browse/")).toBeUndefined();
    expect(parseBrowseHref("/console/browse/%E0%A4%A")).toBeUndefined();
    expect(parseBrowseHref("/console/stores")).toBeUndefined();
    expect(restDataUrl("home", "a b/c?.txt")).toBe("/resources/v2/data/home/a%20b/c%3F.txt");
  });

  it("parents, ancestors and names", () => {
    expect(parentPath("a/b/c")).toBe("a/b");
    expect(parentPath("a")).toBe("");
    expect(ancestors("a/b")).toEqual(["", "a", "a/b"]);
    expect(ancestors("")).toEqual([""]);
    expect(nameProblem("ok.txt")).toBeUndefined();
    expect(nameProblem("a/b")).toBe("a name cannot contain /");
    expect(nameProblem("..")).toBe(".. is not a name");
    expect(nameProblem(" ")).toBe("a name is required");
  });
});

describe("write preconditions and conflicts", () => {
  it("If-Match with the tag the user saw; If-None-Match: * for a name that was free", () => {
    expect(preconditionFor({ tag: "abc" })).toEqual({ "If-Match": '"abc"' });
    expect(preconditionFor({ absent: true })).toEqual({ "If-None-Match": "*" });
    expect(preconditionFor(undefined)).toEqual({});
  });

  it("412 is a conflict, never a silent replace; other failures say why", () => {
    expect(writeOutcome(412, null, "", { tag: "abc" })).toEqual({
      kind: "conflict",
      message: "This resource changed since you opened it.",
    });
    expect(writeOutcome(412, null, "", { absent: true })).toMatchObject({ kind: "conflict" });
    expect(writeOutcome(201, '"xyz"', "", { absent: true })).toEqual({ kind: "written", tag: "xyz" });
    expect(writeOutcome(403, null, "no write access to home\n", { tag: "a" })).toEqual({
      kind: "failed",
      message: "Not allowed: no write access to home",
    });
  });

  it("an overwrite is made against the server's current tag, or as a new resource if it went", () => {
    expect(overwriteSeen({ tag: "now" })).toEqual({ tag: "now" });
    expect(overwriteSeen(undefined)).toEqual({ absent: true });
  });
});

describe("virtual list", () => {
  it("renders the rows in view and a margin, never past the ends", () => {
    expect(visibleRows(0, 340, 34, 10_000, 8)).toEqual({ start: 0, end: 19, offset: 0 });
    expect(visibleRows(34 * 5000, 340, 34, 10_000, 8)).toEqual({ start: 4992, end: 5019, offset: 4992 * 34 });
    expect(visibleRows(34 * 9999, 340, 34, 10_000, 8).end).toBe(10_000);
    expect(visibleRows(0, 340, 34, 0)).toEqual({ start: 0, end: 0, offset: 0 });
  });

  it("scrolls a row into view only when it is out of view", () => {
    expect(scrollToRow(0, 0, 340, 34)).toBeUndefined();
    expect(scrollToRow(20, 0, 340, 34)).toBe(21 * 34 - 340);
    expect(scrollToRow(2, 340, 340, 34)).toBe(68);
  });

  it("sizes", () => {
    expect(formatSize(16n)).toBe("16 B");
    expect(formatSize(1200)).toBe("1.2 KiB");
    expect(formatSize(20 * 1024 * 1024)).toBe("20 MiB");
  });
});

describe("the Type column and the header (issue 30)", () => {
  it("names the design-resource kind of a Trove media type, parameters and case aside", () => {
    expect(typeLabel("application/vnd.trove.template+json")).toBe("template");
    expect(typeLabel("application/vnd.trove.content-block+json")).toBe("block");
    expect(typeLabel("application/vnd.trove.pluggable-object+json")).toBe("plugin");
    expect(typeLabel("application/vnd.trove.data-model+json; charset=utf-8")).toBe("data model");
    expect(typeLabel("Application/Vnd.Trove.Theme+JSON")).toBe("theme");
    expect(typeLabel("", true)).toBe("folder");
  });

  it("gives another media type its readable form, never the bare vnd. prefix", () => {
    expect(typeLabel("application/json")).toBe("JSON");
    expect(typeLabel("text/plain")).toBe("text");
    expect(typeLabel("application/pdf")).toBe("PDF");
    expect(typeLabel("image/png")).toBe("PNG image");
    expect(typeLabel("image/svg+xml")).toBe("SVG image");
    expect(typeLabel("application/vnd.openxmlformats-officedocument.presentationml.presentation")).toBe(
      "openxmlformats-officedocument.presentationml.presentation",
    );
    expect(typeLabel("application/vnd.acme.form+json")).toBe("acme.form (JSON)");
    expect(typeLabel("text/x-shellscript")).toBe("shellscript text");
    expect(typeLabel("")).toBe("unknown");
  });

  it("reads the report document's type names as the same kinds", () => {
    expect(kindOfReportType("contentBlock")).toBe("block");
    expect(kindOfReportType("pluggableObject")).toBe("plugin");
    expect(kindOfReportType("other")).toBeUndefined();
    expect(reportTypeLabel("datamodel")).toBe("data model");
    expect(reportTypeLabel("")).toBe("unknown");
  });

  it("the header's user is the token's name, preferred_username, email or subject, in that order; none for an opaque token", () => {
    const jwt = (claims: object) => `e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.c2ln`;
    expect(userNameOf(jwt({ sub: "u-1", email: "ana@example.com", name: "Ana Lima" }))).toBe("Ana Lima");
    expect(userNameOf(jwt({ sub: "u-1", preferred_username: "ana" }))).toBe("ana");
    expect(userNameOf(jwt({ sub: "u-1", email: "ana@example.com" }))).toBe("ana@example.com");
    expect(userNameOf(jwt({ sub: "developer", name: " " }))).toBe("developer");
    expect(userNameOf(jwt({ sub: "Zoë" }))).toBe("Zoë");
    expect(userNameOf("opaque-token")).toBeUndefined();
  });
});

describe("history: the line diff and the moments (issue 30)", () => {
  /** The length of a longest common subsequence, by the textbook table (small inputs only). */
  const lcs = (a: string[], b: string[]) => {
    const t = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
    for (let i = 1; i <= a.length; i++)
      for (let j = 1; j <= b.length; j++)
        (t[i] as number[])[j] =
          a[i - 1] === b[j - 1]
            ? ((t[i - 1] as number[])[j - 1] as number) + 1
            : Math.max((t[i - 1] as number[])[j] as number, (t[i] as number[])[j - 1] as number);
    return (t[a.length] as number[])[b.length] as number;
  };

  it("the script rebuilds both texts and keeps a longest common subsequence (minimal edits)", () => {
    const lines = fc.array(fc.constantFrom("a", "b", "c", "d", ""), { maxLength: 25 });
    fc.assert(
      fc.property(lines, lines, (a, b) => {
        const ops = diffLines(a, b) ?? [];
        expect(ops.filter((o) => o.kind !== "added").map((o) => o.line)).toEqual(a);
        expect(ops.filter((o) => o.kind !== "removed").map((o) => o.line)).toEqual(b);
        expect(ops.filter((o) => o.kind === "same")).toHaveLength(lcs(a, b));
      }),
    );
  });

  it("side by side: a removal beside the addition that replaces it, numbers per side", () => {
    const rows = sideBySide(diffLines(splitLines("a\nb\nc\n"), splitLines("a\nB\nc\nd")) ?? []);
    expect(rows).toEqual([
      { kind: "same", left: { number: 1, line: "a" }, right: { number: 1, line: "a" } },
      { kind: "changed", left: { number: 2, line: "b" }, right: { number: 2, line: "B" } },
      { kind: "same", left: { number: 3, line: "c" }, right: { number: 3, line: "c" } },
      { kind: "added", left: undefined, right: { number: 4, line: "d" } },
    ]);
    expect(splitLines("x\r\ny")).toEqual(["x", "y"]);
    expect(splitLines("")).toEqual([]);
  });

  it("is bounded: texts differing in more lines than the bound are refused, not compared", () => {
    const a = Array.from({ length: 3000 }, (_, i) => `a${i}`);
    const b = Array.from({ length: 3000 }, (_, i) => `b${i}`);
    expect(diffLines(a, b)).toBeUndefined();
    expect(diffLines(a, [...a.slice(0, 1500), "x", ...a.slice(1500)])).toHaveLength(3001);
  });

  it("a browse URL keeps the moment; a datetime-local value is read in the browser's zone", () => {
    expect(asOfHref("/console/browse/home/a/", "2026-11-27T15:00:00.000Z")).toBe(
      "/console/browse/home/a/?as-of=2026-11-27T15%3A00%3A00.000Z",
    );
    expect(asOfHref("/console/browse/home/", "")).toBe("/console/browse/home/");
    expect(asOfOf("?as-of=12")).toBe("12");
    expect(asOfOf("")).toBe("");
    expect(momentOfLocal("2026-11-27T15:00")).toBe(new Date(2026, 10, 27, 15, 0).toISOString());
    expect(momentOfLocal("2026-11-27T15:00:07")).toBe(new Date(2026, 10, 27, 15, 0, 7).toISOString());
    expect(momentOfLocal("")).toBeUndefined();
    expect(momentOfLocal("yesterday")).toBeUndefined();
  });
});
