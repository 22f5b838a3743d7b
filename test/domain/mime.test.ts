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
    expect(typeFromName("data.tar.gz")).toBe("application/gzip");
    expect(typeFromName("invoice.template.json")).toBe("application/json");
    expect(typeFromName("invoice.json.template")).toBe("application/vnd.trove.template+json");
  });

  it("keeps every type of Trove's own table (the types it has always given)", () => {
    const table: Record<string, string> = {
      json: "application/json",
      xml: "application/xml",
      txt: "text/plain",
      md: "text/markdown",
      html: "text/html",
      htm: "text/html",
      css: "text/css",
      js: "text/javascript",
      csv: "text/csv",
      svg: "image/svg+xml",
      png: "image/png",
      jpg: "image/jpeg",
      jpeg: "image/jpeg",
      gif: "image/gif",
      webp: "image/webp",
      pdf: "application/pdf",
      zip: "application/zip",
      ttf: "font/ttf",
      otf: "font/otf",
      woff: "font/woff",
      woff2: "font/woff2",
      template: "application/vnd.trove.template+json",
      block: "application/vnd.trove.content-block+json",
      plugin: "application/vnd.trove.pluggable-object+json",
      datamodel: "application/vnd.trove.data-model+json",
      theme: "application/vnd.trove.theme+json",
    };
    for (const [extension, type] of Object.entries(table)) {
      expect([extension, typeFromName(`file.${extension}`)]).toEqual([extension, type]);
      expect([extension, typeFromName(`FILE.${extension.toUpperCase()}`)]).toEqual([extension, type]);
    }
  });

  it("gives the real type of extensions beyond Trove's table, from the mime-db database", () => {
    expect(typeFromName("conf.yaml")).toBe("application/yaml");
    expect(typeFromName("conf.YML")).toBe("application/yaml");
    expect(typeFromName("logo.ico")).toBe("image/vnd.microsoft.icon");
    expect(typeFromName("doc.docx")).toBe("application/vnd.openxmlformats-officedocument.wordprocessingml.document");
    expect(typeFromName("sheet.xlsx")).toBe("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet");
    expect(typeFromName("photo.avif")).toBe("image/avif");
    expect(typeFromName("scan.tiff")).toBe("image/tiff");
    expect(typeFromName("clip.mp4")).toBe("video/mp4");
    expect(typeFromName("module.mjs")).toBe("text/javascript");
    expect(typeFromName("layers.psd")).toBe("image/vnd.adobe.photoshop");
  });

  it("looks up only a real extension: a bare name that is an extension, or a prototype key, is not one", () => {
    for (const name of ["json", "yaml", "docx", "a.constructor", "a.__proto__", "a.toString", "a.hasOwnProperty"]) {
      expect([name, typeFromName(name)]).toEqual([name, DEFAULT_TYPE]);
    }
  });

  it("falls back to application/octet-stream without a known extension", () => {
    expect(DEFAULT_TYPE).toBe("application/octet-stream");
    for (const name of ["Makefile", "a.unknown", "a.", ".json", ".yaml", ".hidden", "", "image.nosuchextension"]) {
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
