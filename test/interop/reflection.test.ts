// gRPC server reflection (issue 13, item 3) as the tools people use see it: grpcurl lists the
// services, describes them and calls a method of every Trove service with no .proto file, as does
// `buf curl` without --schema; and every kind of v1alpha question answered to a gRPC client.

import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { create, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ExtensionRequestSchema,
  type ServerReflectionRequest,
  ServerReflection as ServerReflectionV1Alpha,
} from "@trove/sdk/gen/grpc/reflection/v1alpha/reflection_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeWithTool, GRPCURL } from "../support/tools.js";
import { type Secured, startSecured } from "./secured.js";

const SERVICES = [
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
  "trove.admin.v1.BackupService",
  "trove.insights.v1.ProjectService",
  "trove.insights.v1.ReportService",
  "trove.resources.v2.ChangeService",
  "trove.resources.v2.ResourceService",
  "trove.resources.v2.StoreService",
];

let s: Secured;
beforeAll(async () => {
  s = await startSecured();
}, 60_000);
afterAll(() => s?.stop());

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describeWithTool(GRPCURL, "grpcurl against the reflection service", (grpcurl) => {
  /** grpcurl [flags] ADDRESS [command...]. */
  const run = (flags: string[], command: string[]) =>
    new Promise<Run>((resolve) => {
      execFile(
        grpcurl,
        ["-plaintext", "-max-time", "60", ...flags, `127.0.0.1:${s.server.port}`, ...command],
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
    });
  /** grpcurl with the token on the call; the JSON it prints. */
  const call = async (method: string, request: unknown) => {
    const r = await run(["-H", `authorization: Bearer ${s.token}`, "-d", JSON.stringify(request)], [method]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout);
  };

  it("list, without a token: the six Trove services, gRPC health and reflection", async () => {
    const r = await run([], ["list"]);
    expect(r).toEqual({ code: 0, stdout: `${SERVICES.join("\n")}\n`, stderr: "" });
  });

  it("list of one service: its methods", async () => {
    const r = await run([], ["list", "trove.resources.v2.ResourceService"]);
    expect(r.stdout.trim().split("\n")).toEqual(
      [
        "Delete",
        "List",
        "ListVersions",
        "MakeDirectory",
        "Read",
        "ReadMany",
        "Restore",
        "Stat",
        "Write",
        "WriteMany",
      ].map((m) => `trove.resources.v2.ResourceService.${m}`),
    );
  });

  it("describe trove.resources.v2.ResourceService: every method with its streams and options", async () => {
    const r = await run([], ["describe", "trove.resources.v2.ResourceService"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      [
        "trove.resources.v2.ResourceService is a service:",
        "service ResourceService {",
        "  rpc Delete ( .trove.resources.v2.DeleteRequest ) returns ( .trove.resources.v2.DeleteResponse );",
        "  rpc List ( .trove.resources.v2.ListRequest ) returns ( stream .trove.resources.v2.ListResponse ) {",
        "    option idempotency_level = NO_SIDE_EFFECTS;",
        "  }",
        "  rpc ListVersions ( .trove.resources.v2.ListVersionsRequest ) returns ( stream .trove.resources.v2.ListVersionsResponse ) {",
        "    option idempotency_level = NO_SIDE_EFFECTS;",
        "  }",
        "  rpc MakeDirectory ( .trove.resources.v2.MakeDirectoryRequest ) returns ( .trove.resources.v2.MakeDirectoryResponse );",
        "  rpc Read ( .trove.resources.v2.ReadRequest ) returns ( stream .trove.resources.v2.ReadResponse ) {",
        "    option idempotency_level = NO_SIDE_EFFECTS;",
        "  }",
        "  rpc ReadMany ( .trove.resources.v2.ReadManyRequest ) returns ( stream .trove.resources.v2.ReadManyResponse ) {",
        "    option idempotency_level = NO_SIDE_EFFECTS;",
        "  }",
        "  rpc Restore ( .trove.resources.v2.RestoreRequest ) returns ( .trove.resources.v2.RestoreResponse );",
        "  rpc Stat ( .trove.resources.v2.StatRequest ) returns ( .trove.resources.v2.StatResponse ) {",
        "    option idempotency_level = NO_SIDE_EFFECTS;",
        "  }",
        "  rpc Write ( stream .trove.resources.v2.WriteRequest ) returns ( .trove.resources.v2.WriteResponse );",
        "  rpc WriteMany ( .trove.resources.v2.WriteManyRequest ) returns ( .trove.resources.v2.WriteManyResponse );",
        "}",
        "",
      ].join("\n"),
    );
  });

  it("describe a message that imports nothing and one that imports a well-known type", async () => {
    const header = await run([], ["describe", "trove.resources.v2.WriteHeader"]);
    expect(header.stdout).toContain("trove.resources.v2.WriteHeader is a message:");
    expect(header.stdout).toContain("optional int64 content_length = 6;");
    const project = await run([], ["describe", "trove.insights.v1.Project"]);
    expect(project.code).toBe(0);
    expect(project.stdout).toMatch(/\.google\.protobuf\.Timestamp \w+ = \d+;/);
  });

  it("calls a method of every Trove service by reflection alone", async () => {
    const { store } = s.example;
    const stat = await call("trove.resources.v2.ResourceService/Stat", { store, path: "draft" });
    expect(stat.resource).toMatchObject({ store, path: "draft", name: "draft", directory: true });

    const got = await call("trove.resources.v2.StoreService/GetStore", { name: store });
    expect(got.store).toMatchObject({ name: store });

    const polled = await call("trove.resources.v2.ChangeService/Poll", {});
    expect(polled.events.map((e: { reset?: { store: string } }) => e.reset?.store)).toContain(store);

    const project = await call("trove.insights.v1.ProjectService/GetProject", { projectId: s.report.projectId });
    expect(project.project).toMatchObject({ id: s.report.projectId, name: "acme-letters", store });

    const report = await call("trove.insights.v1.ReportService/GetReport", { key: s.report });
    expect(report.status).toMatchObject({ state: "REPORT_STATE_GENERATED" });
  });

  it("a call without a token is refused Unauthenticated (reflection alone needs none)", async () => {
    const r = await run(
      ["-d", JSON.stringify({ name: s.example.store })],
      ["trove.resources.v2.StoreService/GetStore"],
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Code: Unauthenticated");
  });
});

describe("buf curl without --schema", () => {
  const buf = fileURLToPath(new URL("../../node_modules/.bin/buf", import.meta.url));
  const curl = (args: string[]) =>
    new Promise<Run>((resolve) => {
      execFile(buf, ["curl", "--http2-prior-knowledge", ...args], (err, stdout, stderr) =>
        resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
    });

  it("finds GetStore by reflection and calls it, over gRPC and over Connect", async () => {
    for (const protocol of ["grpc", "connect"]) {
      const r = await curl([
        "--protocol",
        protocol,
        "-H",
        `Authorization: Bearer ${s.token}`,
        "-d",
        JSON.stringify({ name: s.example.store }),
        `${s.server.url}/trove.resources.v2.StoreService/GetStore`,
      ]);
      expect(r.stderr, protocol).toBe("");
      expect(JSON.parse(r.stdout).store, protocol).toMatchObject({ name: s.example.store });
    }
  });
});

describe("grpc.reflection.v1alpha over a gRPC client", () => {
  type Question = ServerReflectionRequest["messageRequest"];
  const ask = async (...questions: Question[]) => {
    const client = createClient(ServerReflectionV1Alpha, createGrpcTransport({ baseUrl: s.server.url }));
    const answers = [];
    for await (const answer of client.serverReflectionInfo(
      (async function* () {
        for (const q of questions) yield { host: "trove", messageRequest: q };
      })(),
    )) {
      answers.push(answer);
    }
    return answers;
  };
  const fileNames = (answer: Awaited<ReturnType<typeof ask>>[number] | undefined) =>
    answer?.messageResponse.case === "fileDescriptorResponse"
      ? answer.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name)
      : [];

  it("answers each question in order on one stream, echoing it", async () => {
    const answers = await ask(
      { case: "listServices", value: "" },
      { case: "fileByFilename", value: "trove/insights/v1/reports.proto" },
      { case: "fileContainingSymbol", value: "trove.resources.v2.ResourceService.Stat" },
      { case: "fileContainingSymbol", value: "trove.insights.v1.GRAPH_FORMAT_DOT" },
      {
        case: "fileContainingExtension",
        value: create(ExtensionRequestSchema, { containingType: "trove.resources.v2.Resource", extensionNumber: 100 }),
      },
      { case: "allExtensionNumbersOfType", value: "trove.resources.v2.Resource" },
      { case: "allExtensionNumbersOfType", value: "trove.resources.v2.NoSuchType" },
      { case: "fileByFilename", value: "no/such.proto" },
      { case: "fileContainingSymbol", value: "trove.resources.v2.NoSuchService" },
    );
    expect(answers).toHaveLength(9);
    for (const a of answers) expect(a.validHost).toBe("trove");
    expect(answers[2]?.originalRequest?.messageRequest).toEqual({
      case: "fileContainingSymbol",
      value: "trove.resources.v2.ResourceService.Stat",
    });

    expect(answers[0]?.messageResponse).toMatchObject({ case: "listServicesResponse" });
    const listed =
      answers[0]?.messageResponse.case === "listServicesResponse" ? answers[0].messageResponse.value : undefined;
    expect(listed?.service.map((x) => x.name).sort()).toEqual(SERVICES);

    // The file first, then what it imports (transitively).
    expect(fileNames(answers[1])).toEqual(["trove/insights/v1/reports.proto", "google/protobuf/timestamp.proto"]);
    expect(fileNames(answers[2])).toEqual(["trove/resources/v2/resources.proto"]);
    expect(fileNames(answers[3])).toEqual(["trove/insights/v1/reports.proto", "google/protobuf/timestamp.proto"]);

    expect(answers[4]?.messageResponse).toEqual({
      case: "errorResponse",
      value: expect.objectContaining({
        errorCode: 5,
        errorMessage: 'extension 100 of "trove.resources.v2.Resource" not found',
      }),
    });
    expect(answers[5]?.messageResponse).toEqual({
      case: "allExtensionNumbersResponse",
      value: expect.objectContaining({ baseTypeName: "trove.resources.v2.Resource", extensionNumber: [] }),
    });
    for (const i of [6, 7, 8]) {
      expect(answers[i]?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: 5 } });
    }
  });

  it("describes the reflection and health services themselves", async () => {
    const [v1, health] = await ask(
      { case: "fileContainingSymbol", value: "grpc.reflection.v1.ServerReflection" },
      { case: "fileContainingSymbol", value: "grpc.health.v1.Health" },
    );
    expect(fileNames(v1)).toEqual(["grpc/reflection/v1/reflection.proto"]);
    expect(fileNames(health)).toEqual(["grpc/health/v1/health.proto"]);
  });
});
