// The report of the example project's production environment (examples/acme-letters),
// built from the files on disk and compared field by field with the committed golden
// document. Times and IDs are masked. After a deliberate change to the example or the
// format: UPDATE_GOLDEN=1 npx vitest run test/insights/golden.test.ts, then review the diff.

import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  buildReport,
  dependenciesOf,
  fileSource,
  missingReferences,
  type ReportDocument,
  referenceCycles,
  unusedResources,
} from "../../src/insights/index.js";
import { REPORT_OPTIONS } from "./memory-source.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/acme-letters/", import.meta.url));
const GOLDEN = fileURLToPath(new URL("./golden/acme-production.json", import.meta.url));
const TIME = "<timestamp>";
const ID = "<uuid>";
const ISO_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function masked(report: ReportDocument): ReportDocument {
  return {
    ...report,
    created: TIME,
    projectID: ID,
    environmentID: ID,
    resources: report.resources.map((r) => ({ ...r, created: TIME, lastModified: TIME })),
  };
}

async function report(environment: "production" | "draft"): Promise<ReportDocument> {
  return buildReport(fileSource(`${EXAMPLE}${environment}`), { ...REPORT_OPTIONS, environmentName: environment });
}

describe("report document of examples/acme-letters/production (golden)", async () => {
  const actual = await report("production");
  if (process.env.UPDATE_GOLDEN === "1") {
    await writeFile(GOLDEN, `${JSON.stringify(masked(actual), null, 2)}\n`);
  }
  const expected = JSON.parse(await readFile(GOLDEN, "utf8")) as ReportDocument;

  it("Report document: version, created, creator, projectID, projectName, environmentID, environmentName", () => {
    const { resources: _a, ...head } = masked(actual);
    const { resources: _b, ...expectedHead } = expected;
    expect(head).toEqual(expectedHead);
    expect(Object.keys(actual)).toEqual([
      "version",
      "created",
      "creator",
      "projectID",
      "projectName",
      "environmentID",
      "environmentName",
      "resources",
    ]);
    expect(actual.created).toMatch(ISO_MS_UTC);
    expect(actual.projectID).toBe(REPORT_OPTIONS.projectID);
  });

  it("Report document: resources lists every design resource of the environment, by path", () => {
    expect(actual.resources.map((r) => r.path)).toEqual(expected.resources.map((r) => r.path));
    expect(actual.resources).toHaveLength(51);
  });

  it("Resource entry: every field equals the golden document's", () => {
    const got = masked(actual).resources;
    for (const [i, want] of expected.resources.entries()) {
      const entry = got[i];
      for (const field of Object.keys(want) as (keyof typeof want)[]) {
        expect(entry?.[field], `${want.path}: ${field}`).toEqual(want[field]);
      }
      expect(Object.keys(entry ?? {}), `${want.path}: fields`).toEqual(Object.keys(want));
    }
  });

  it("Resource entry: created and lastModified are ISO 8601 timestamps", () => {
    for (const entry of actual.resources) {
      expect(entry.created).toMatch(ISO_MS_UTC);
      expect(entry.lastModified).toMatch(ISO_MS_UTC);
    }
  });

  it("production is clean: no problems, no missing references, no cycles; two resources unused", () => {
    expect(actual.resources.filter((r) => r.problems)).toEqual([]);
    expect(missingReferences(actual)).toEqual([]);
    expect(referenceCycles(actual)).toEqual([]);
    expect(unusedResources(actual)).toEqual([
      { path: "/blocks/marketing/cross-sell-offer.block", type: "contentBlock" },
      { path: "/plugins/chart.plugin", type: "pluggableObject" },
    ]);
  });
});

describe("report of examples/acme-letters/draft", async () => {
  const draft = await report("draft");

  it("lists the 55 design resources of draft, none with problems", () => {
    expect(draft.resources).toHaveLength(55);
    expect(draft.resources.filter((r) => r.problems)).toEqual([]);
  });

  it("flags the reference to the SEPA terms block that is not written yet", () => {
    expect(missingReferences(draft)).toEqual([
      {
        path: "/templates/letters/direct-debit-mandate.template",
        kind: "contentBlock",
        name: "sepa-terms",
        relativePath: "../../blocks/legal/sepa-terms.block",
        absolutePath: "/blocks/legal/sepa-terms.block",
      },
    ]);
  });

  it("finds the cycle between the cross-sell offer and the loyalty discount", () => {
    expect(referenceCycles(draft)).toEqual([
      {
        resources: ["/blocks/marketing/cross-sell-offer.block", "/blocks/marketing/loyalty-discount.block"],
        cycle: [
          "/blocks/marketing/cross-sell-offer.block",
          "/blocks/marketing/loyalty-discount.block",
          "/blocks/marketing/cross-sell-offer.block",
        ],
      },
    ]);
  });

  it("the welcome letter uses the cycle transitively", () => {
    const all = dependenciesOf(draft, "/templates/letters/welcome-letter.template").all.map((r) => r.path);
    expect(all).toContain("/blocks/marketing/loyalty-discount.block");
    expect(all).toContain("/themes/acme-2027.theme");
  });
});
