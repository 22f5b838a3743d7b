// Structured errors (issue 13, item 7): a failed If-Match carries google.rpc.PreconditionFailure
// with the current tag, an invalid argument google.rpc.BadRequest with the proto field, a size
// limit google.rpc.QuotaFailure; in Connect `details`, in gRPC's grpc-status-details-bin (read
// here by a stock @grpc/grpc-js client), and as the SDK's typed errors.

import { create, type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import {
  BadRequestSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
} from "@trove/sdk/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "@trove/sdk/gen/google/rpc/status_pb.js";
import { ReportService } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import {
  DeleteRequestSchema,
  DeleteResponseSchema,
  ResourceService,
  StatRequestSchema,
  StatResponseSchema,
  WriteRequestSchema,
  WriteResponseSchema,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createTroveClient,
  fromConnectError,
  PayloadTooLargeError,
  PreconditionFailedError,
  BadRequestError as SdkBadRequestError,
  type TroveClient,
} from "../../sdk/src/index.js";
import { type Secured, startSecured } from "./secured.js";

let s: Secured;
/** A resource of the example's draft environment, and its current tag. */
const FILE = "draft/themes/acme-print.theme";
let tag: string;
let grpcClient: grpc.Client;
let sdk: TroveClient;

beforeAll(async () => {
  s = await startSecured();
  const resources = createClient(ResourceService, s.connect());
  tag = (await resources.stat({ store: s.example.store, path: FILE })).resource?.tag ?? "";
  expect(tag).not.toBe("");
  grpcClient = new grpc.Client(`127.0.0.1:${s.server.port}`, grpc.credentials.createInsecure());
  sdk = createTroveClient({ baseUrl: s.server.url, auth: s.token, protocol: "grpc" });
}, 60_000);
afterAll(async () => {
  grpcClient?.close();
  sdk?.close();
  await s?.stop();
});

async function rejection(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call succeeded");
}

/** What a failed If-Match on FILE carries. */
const etagViolation = () => ({
  type: "ETAG",
  subject: `${s.example.store}/${FILE}`,
  description: `current tag "${tag}"`,
});

describe("with a Connect client (details)", () => {
  const resources = () => createClient(ResourceService, s.connect());

  it("a Delete with a stale if_match is FAILED_PRECONDITION with a PreconditionFailure holding the current tag", async () => {
    const err = await rejection(resources().delete({ store: s.example.store, path: FILE, ifMatch: ['"stale"'] }));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toBe(`if_match does not match the current ETag "${tag}"`);
    const [failure] = err.findDetails(PreconditionFailureSchema);
    expect(failure?.violations).toEqual([expect.objectContaining(etagViolation())]);
  });

  it("a Write with a stale if_match names the resource of its header", async () => {
    const err = await rejection(
      resources().write(
        (async function* () {
          yield {
            part: {
              case: "header" as const,
              value: { store: s.example.store, path: FILE, ifMatch: ['"stale"'] },
            },
          };
          yield { part: { case: "chunk" as const, value: new TextEncoder().encode("{}") } };
        })(),
      ),
    );
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.findDetails(PreconditionFailureSchema)[0]?.violations).toEqual([
      expect.objectContaining(etagViolation()),
    ]);
  });

  it("issue 30: a Write with if_none_match * on an existing resource is FAILED_PRECONDITION with its reason; nothing changes", async () => {
    const write = (path: string, body: string) =>
      resources().write(
        (async function* () {
          yield { part: { case: "header" as const, value: { store: s.example.store, path, ifNoneMatch: ["*"] } } };
          yield { part: { case: "chunk" as const, value: new TextEncoder().encode(body) } };
        })(),
      );
    const err = await rejection(write(FILE, "{}"));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toBe(`if_none_match * given but /${FILE} exists (current ETag "${tag}")`);
    expect(err.findDetails(PreconditionFailureSchema)[0]?.violations).toEqual([
      expect.objectContaining(etagViolation()),
    ]);
    expect((await resources().stat({ store: s.example.store, path: FILE })).resource?.tag).toBe(tag);
    // Where nothing is, the same write creates.
    const made = await write("draft/created-once.json", "{}");
    expect(made.created).toBe(true);
    expect(await rejection(write("draft/created-once.json", "{}"))).toMatchObject({ code: Code.FailedPrecondition });
    await resources().delete({ store: s.example.store, path: "draft/created-once.json" });
  });

  it("issue 30: a MakeDirectory with if_none_match * on an existing directory is FAILED_PRECONDITION", async () => {
    const err = await rejection(
      resources().makeDirectory({ store: s.example.store, path: "draft", ifNoneMatch: ["*"] }),
    );
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(
      /^if_none_match \* given but a directory \/draft\/ exists \(current ETag "[^"]+"\)$/,
    );
  });

  it("an if_match on a missing resource says it does not exist", async () => {
    const err = await rejection(
      resources().makeDirectory({ store: s.example.store, path: "draft/none", ifMatch: ["*"] }),
    );
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.findDetails(PreconditionFailureSchema)[0]?.violations).toEqual([
      expect.objectContaining({
        type: "ETAG",
        subject: `${s.example.store}/draft/none`,
        description: "the resource does not exist",
      }),
    ]);
  });

  it("an invalid path is INVALID_ARGUMENT with a BadRequest naming the field path", async () => {
    const err = await rejection(resources().stat({ store: s.example.store, path: "draft//x" }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.findDetails(BadRequestSchema)[0]?.fieldViolations).toEqual([
      expect.objectContaining({ field: "path", description: err.rawMessage }),
    ]);
  });

  it("a malformed content_md5 in a write's header names header.content_md5", async () => {
    const err = await rejection(
      resources().write(
        (async function* () {
          yield {
            part: {
              case: "header" as const,
              value: { store: s.example.store, path: "draft/new.json", contentMd5: "not-md5" },
            },
          };
        })(),
      ),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toBe("content_md5 must be the base64 text of a 16-byte MD5 digest");
    expect(err.findDetails(BadRequestSchema)[0]?.fieldViolations).toEqual([
      expect.objectContaining({ field: "header.content_md5", description: err.rawMessage }),
    ]);
  });

  it("a malformed report ID names key.report_id, a field of a message the request holds", async () => {
    const reports = createClient(ReportService, s.connect());
    const err = await rejection(reports.getReport({ key: { ...s.report, reportId: "not-an-id" } }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.findDetails(BadRequestSchema)[0]?.fieldViolations).toEqual([
      expect.objectContaining({ field: "key.report_id", description: err.rawMessage }),
    ]);
  });

  it("contents announced larger than the limit are RESOURCE_EXHAUSTED with a QuotaFailure", async () => {
    const err = await rejection(
      resources().write(
        (async function* () {
          yield {
            part: {
              case: "header" as const,
              value: { store: s.example.store, path: "draft/huge.bin", contentLength: 1n << 50n },
            },
          };
        })(),
      ),
    );
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.findDetails(QuotaFailureSchema)[0]?.violations).toEqual([
      expect.objectContaining({ subject: "max-resource-size", description: err.rawMessage }),
    ]);
  });

  it("the same details travel as Connect JSON: `details` with type and base64 value", async () => {
    const res = await fetch(`${s.server.url}/trove.resources.v2.ResourceService/Delete`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${s.token}` },
      body: JSON.stringify({ store: s.example.store, path: FILE, ifMatch: ['"stale"'] }),
    });
    expect(res.status).toBe(400); // the Connect protocol's status for failed_precondition
    const body = (await res.json()) as { code: string; details: { type: string; value: string }[] };
    expect(body.code).toBe("failed_precondition");
    expect(body.details.map((d) => d.type)).toEqual(["google.rpc.PreconditionFailure"]);
    const failure = fromBinary(PreconditionFailureSchema, Buffer.from(body.details[0]?.value ?? "", "base64"));
    expect(failure.violations).toEqual([expect.objectContaining(etagViolation())]);
  });
});

/** A unary call with a stock grpc-js client, (de)serialized with the generated schemas. */
function grpcUnary<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  request: MessageShape<I>,
): Promise<grpc.ServiceError> {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${s.token}`);
  return new Promise((resolve, reject) => {
    grpcClient.makeUnaryRequest(
      method,
      (m: MessageShape<I>) => Buffer.from(toBinary(input, m)),
      (b: Buffer) => fromBinary(output, b),
      request,
      metadata,
      (err) => (err ? resolve(err) : reject(new Error("the call succeeded"))),
    );
  });
}

/** google.rpc.Status from grpc-status-details-bin, as any gRPC client decodes it. */
function statusDetails(err: grpc.ServiceError) {
  const [bin] = err.metadata.get("grpc-status-details-bin");
  expect(bin).toBeInstanceOf(Buffer);
  return fromBinary(StatusSchema, bin as Buffer);
}

describe("with a raw @grpc/grpc-js client (grpc-status-details-bin)", () => {
  it("a stale if_match: google.rpc.Status with the code, the message and a PreconditionFailure", async () => {
    const err = await grpcUnary(
      "/trove.resources.v2.ResourceService/Delete",
      DeleteRequestSchema,
      DeleteResponseSchema,
      create(DeleteRequestSchema, { store: s.example.store, path: FILE, ifMatch: ['"stale"'] }),
    );
    expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
    const status = statusDetails(err);
    expect(status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(status.message).toBe(`if_match does not match the current ETag "${tag}"`);
    expect(status.details.map((d) => d.typeUrl)).toEqual(["type.googleapis.com/google.rpc.PreconditionFailure"]);
    const failure = anyUnpack(status.details[0] as NonNullable<(typeof status.details)[0]>, PreconditionFailureSchema);
    expect(failure?.violations).toEqual([expect.objectContaining(etagViolation())]);
  });

  it("an invalid path: a BadRequest naming the field", async () => {
    const err = await grpcUnary(
      "/trove.resources.v2.ResourceService/Stat",
      StatRequestSchema,
      StatResponseSchema,
      create(StatRequestSchema, { store: s.example.store, path: "draft/../x" }),
    );
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    const status = statusDetails(err);
    expect(status.details.map((d) => d.typeUrl)).toEqual(["type.googleapis.com/google.rpc.BadRequest"]);
    const bad = anyUnpack(status.details[0] as NonNullable<(typeof status.details)[0]>, BadRequestSchema);
    expect(bad?.fieldViolations.map((v) => v.field)).toEqual(["path"]);
  });

  it("too large: a QuotaFailure (client stream)", async () => {
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${s.token}`);
    const err = await new Promise<grpc.ServiceError>((resolve, reject) => {
      const call = grpcClient.makeClientStreamRequest(
        "/trove.resources.v2.ResourceService/Write",
        (m: MessageShape<typeof WriteRequestSchema>) => Buffer.from(toBinary(WriteRequestSchema, m)),
        (b: Buffer) => fromBinary(WriteResponseSchema, b),
        metadata,
        (e) => (e ? resolve(e) : reject(new Error("the call succeeded"))),
      );
      call.write(
        create(WriteRequestSchema, {
          part: { case: "header", value: { store: s.example.store, path: "draft/huge.bin", contentLength: 1n << 50n } },
        }),
      );
      call.end();
    });
    expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const status = statusDetails(err);
    const quota = anyUnpack(status.details[0] as NonNullable<(typeof status.details)[0]>, QuotaFailureSchema);
    expect(quota?.violations.map((v) => v.subject)).toEqual(["max-resource-size"]);
  });
});

describe("through the SDK (gRPC)", () => {
  it("PreconditionFailedError exposes the current tag and the PreconditionFailure", async () => {
    const err = fromConnectError(
      await rejection(sdk.resources.delete({ store: s.example.store, path: FILE, ifMatch: ['"stale"'] })),
    );
    expect(err).toBeInstanceOf(PreconditionFailedError);
    expect((err as PreconditionFailedError).currentTag).toBe(tag);
    expect(err.details.preconditionFailure?.violations).toEqual([expect.objectContaining(etagViolation())]);
  });

  it("issue 30: a Write with ifNoneMatch * on an existing resource is PreconditionFailedError with the current tag", async () => {
    const err = fromConnectError(
      await rejection(
        sdk.resources.write(
          (async function* () {
            yield {
              part: { case: "header" as const, value: { store: s.example.store, path: FILE, ifNoneMatch: ["*"] } },
            };
            yield { part: { case: "chunk" as const, value: new TextEncoder().encode("{}") } };
          })(),
        ),
      ),
    );
    expect(err).toBeInstanceOf(PreconditionFailedError);
    expect((err as PreconditionFailedError).currentTag).toBe(tag);
    expect(err.reason).toBe(`if_none_match * given but /${FILE} exists (current ETag "${tag}")`);
  });

  it("BadRequestError exposes the field", async () => {
    const err = fromConnectError(await rejection(sdk.resources.stat({ store: s.example.store, path: "draft//x" })));
    expect(err).toBeInstanceOf(SdkBadRequestError);
    expect((err as SdkBadRequestError).field).toBe("path");
    expect(err.details.badRequest?.fieldViolations[0]?.description).toBe(err.reason);
  });

  it("PayloadTooLargeError exposes the QuotaFailure", async () => {
    const err = fromConnectError(
      await rejection(
        sdk.resources.write(
          (async function* () {
            yield {
              part: {
                case: "header" as const,
                value: { store: s.example.store, path: "draft/huge.bin", contentLength: 1n << 50n },
              },
            };
          })(),
        ),
      ),
    );
    expect(err).toBeInstanceOf(PayloadTooLargeError);
    expect(err.details.quotaFailure?.violations.map((v) => v.subject)).toEqual(["max-resource-size"]);
  });

  it("an error without details has none", async () => {
    const err = fromConnectError(await rejection(sdk.resources.stat({ store: s.example.store, path: "draft/none" })));
    expect(err.status).toBe(404);
    expect(err.details).toEqual({});
  });
});
