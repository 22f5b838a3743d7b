// MIME types: the default a resource gets from its name, and which given types are valid.

import { describe, expect, it } from "vitest";
import { DEFAULT_TYPE, isMediaType, typeFromName } from "../../src/domain/mime.js";

describe("typeFromName", () => {
  it("takes the type from the extension, in any case", () => {
    expect(typeFromName("a.json")).toBe("application/json");
    expect(typeFromName("README.MD")).toBe("text/markdown");
    expect(typeFromName("logo.Svg")).toBe("image/svg+xml");
    expect(typeFromName("page.htm")).toBe("text/html");
  });

  it("knows the design-resource extensions", () => {
    expect(typeFromName("invoice.template")).toBe("application/vnd.trove.template+json");
    expect(typeFromName("footer.block")).toBe("application/vnd.trove.content-block+json");
    expect(typeFromName("chart.plugin")).toBe("application/vnd.trove.pluggable-object+json");
    expect(typeFromName("customer.datamodel")).toBe("application/vnd.trove.data-model+json");
    expect(typeFromName("brand.theme")).toBe("application/vnd.trove.theme+json");
  });

  it("uses only the last extension", () => {
    expect(typeFromName("archive.json.zip")).toBe("application/zip");
    expect(typeFromName("data.tar.gz")).toBe(DEFAULT_TYPE);
  });

  it("falls back to application/octet-stream without a known extension", () => {
    expect(DEFAULT_TYPE).toBe("application/octet-stream");
    for (const name of ["Makefile", "a.unknown", "a.", ".json", ".hidden", ""]) {
      expect(typeFromName(name)).toBe(DEFAULT_TYPE);
    }
  });
});

describe("isMediaType", () => {
  it("accepts type/subtype with optional parameters, quoted or not", () => {
    for (const value of [
      "text/plain",
      "application/vnd.trove.template+json",
      "text/plain;charset=utf-8",
      "text/plain; charset=utf-8",
      'text/plain ; charset="utf-8"',
      'multipart/form-data; boundary="a b\\"c"; x=y',
      "application/x-www-form-urlencoded",
    ]) {
      expect([value, isMediaType(value)]).toEqual([value, true]);
    }
  });

  it("rejects anything that is not a media type", () => {
    for (const value of [
      "",
      "text",
      "text/",
      "/plain",
      "text/plain/x",
      "text /plain",
      "text/ plain",
      "text/plain;",
      "text/plain; charset",
      "text/plain; charset=",
      'text/plain; charset="utf-8',
      "text/plain\r\nX-Injected: 1",
      "tëxt/plain",
      " text/plain",
    ]) {
      expect([value, isMediaType(value)]).toEqual([value, false]);
    }
  });

  it("rejects values longer than 255 characters", () => {
    const subtype = "x".repeat(250);
    expect(isMediaType(`text/${subtype}`)).toBe(true);
    expect(isMediaType(`text/${subtype}x`)).toBe(false);
  });
});
