// The RPC face: every service of the route table (src/server/routes.ts) registered on one connect-node
// adapter that serves Connect, gRPC and gRPC-Web, with its limits, and the answer to a path no
// service has. The services are the cores, wrapped so that what they throw has its RPC code.

import type * as http from "node:http";
import { Code, ConnectError, type ConnectRouter, createContextValues, type ServiceImpl } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { BackupService } from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { type Caller, callerKey, nobody } from "../auth/caller.js";
import { type RestRequest, type RestResponse, sendText, splitUrl } from "../rest/http.js";
import type { Cores } from "../server/cores.js";
import { rpcReadMaxBytes } from "../server/limits.js";
import { claimOf, longLivedClaimKey } from "../services/long-lived.js";
import type { ResourceCore } from "../services/resource-service.js";
import { giveBack } from "../storage/chunk-pool.js";
import { toConnectError, withConnectErrors, withRequestDecodeErrors } from "./connect-errors.js";
import { dropUnreadBody, rpcProtocol, sendRpcError, unimplementedReason } from "./refusals.js";

/** Standard RPC services open to every caller (gRPC health, reflection), registered beside Trove's. */
export type OpenServices = (router: ConnectRouter) => void;

export interface ConnectFaceOptions {
  cores: Cores;
  maxResourceSize: number;
  /** Registers the open RPC services (each registration in turn). */
  openServices?: OpenServices | readonly OpenServices[];
  /** The caller the pipeline decided for a request. */
  callerOf(req: unknown): Caller | undefined;
}

/**
 * ResourceService as the RPC faces serve it: Read gives each chunk of contents back to the
 * storage's read buffers (src/storage/chunk-pool.ts) once connect has serialized its message.
 * connect serializes a message, copying its chunk, before it asks the handler for the next one
 * (connect 2.1, in the gRPC, gRPC-Web and Connect protocols alike: the handler's iterator feeds
 * `transformSerializeEnvelope` directly), so when Read resumes nothing reads the last chunk any
 * more. Without this each Read message also took a new 1 MiB buffer, garbage soon after: back to
 * back 20 MiB Reads then set off a full mark-compact each (external memory pressure), 83 ms of
 * server CPU per Read against 33 ms (issue 14, docs/benchmarks.md). A call that ends before
 * resuming gives nothing back: the chunk is then freed as any buffer. Chunks the storage did not
 * lend (inline contents, MongoDB's) are left alone.
 */
function rpcResources(
  core: Omit<ServiceImpl<typeof ResourceService>, "readMany" | "writeMany"> &
    Pick<ResourceCore, "readEach" | "writeEach">,
): ServiceImpl<typeof ResourceService> {
  return {
    ...core,
    async *read(request, context) {
      for await (const message of core.read(request, context)) {
        yield message;
        if (message.chunk) giveBack(message.chunk);
      }
    },
    // A path's error is its message (the code Read would end with), and the call goes on.
    async *readMany(request, context) {
      for await (const item of core.readEach(request, context)) {
        if ("read" in item) {
          yield {
            $typeName: "trove.resources.v2.ReadManyResponse",
            index: item.index,
            read: item.read,
            errorCode: "",
            errorMessage: "",
          };
          if (item.read.chunk) giveBack(item.read.chunk);
        } else {
          const err = toConnectError(item.error, {
            method: context.method,
            store: request.store,
            path: request.paths[item.index],
          });
          yield {
            $typeName: "trove.resources.v2.ReadManyResponse",
            index: item.index,
            read: undefined,
            errorCode: codeToString(err.code),
            errorMessage: err.rawMessage,
          };
        }
      }
    },
    // An item's refusal is its result (the code Write would end with); the others are written.
    async writeMany(request, context) {
      const outcomes = await core.writeEach(request, context);
      return {
        $typeName: "trove.resources.v2.WriteManyResponse",
        results: outcomes.map((outcome, index) => {
          if ("write" in outcome) {
            return {
              $typeName: "trove.resources.v2.WriteManyResult",
              write: outcome.write,
              errorCode: "",
              errorMessage: "",
            };
          }
          const err = toConnectError(outcome.error, {
            method: context.method,
            store: request.store,
            path: request.items[index]?.path,
          });
          return {
            $typeName: "trove.resources.v2.WriteManyResult",
            write: undefined,
            errorCode: codeToString(err.code),
            errorMessage: err.rawMessage,
          };
        }),
      };
    },
  };
}

/** The Connect, gRPC and gRPC-Web face: a handler of the requests the route table gives to "rpc". */
export function createConnectFace(options: ConnectFaceOptions): (req: RestRequest, res: RestResponse) => void {
  const { cores, callerOf } = options;
  const routes = (router: ConnectRouter) => {
    router.service(ResourceService, rpcResources(withConnectErrors(cores.resources)));
    router.service(StoreService, withConnectErrors(cores.stores));
    router.service(ChangeService, withConnectErrors(cores.changes));
    router.service(ProjectService, withConnectErrors(cores.projects));
    router.service(ReportService, withConnectErrors(cores.reports));
    router.service(BackupService, withConnectErrors(cores.backup));
    for (const register of [options.openServices ?? []].flat()) register(router);
  };
  const adapter = connectNodeAdapter({
    // A body that does not decode is the client's mistake: InvalidArgument, not Internal.
    routes: withRequestDecodeErrors(routes),
    contextValues(req) {
      const values = createContextValues();
      values.set(callerKey, callerOf(req) ?? nobody);
      // A Read of a large resource claims its long-lived place through it (services/long-lived.ts).
      values.set(longLivedClaimKey, claimOf(req));
      return values;
    },
    // A larger message is refused (RESOURCE_EXHAUSTED) before it is buffered, a larger declared length at once.
    readMaxBytes: rpcReadMaxBytes(options.maxResourceSize),
    // Answers go uncompressed, as REST's do: gzip of a Read's chunks cost more than the transfer
    // (issue 14, docs/benchmarks.md). Compressed requests are still accepted.
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    // No maxTimeoutMs: a client may wait as long as it likes on Poll, WatchChanges and WatchReport.
    fallback: (nodeReq, nodeRes) => {
      const req = nodeReq as RestRequest;
      const res = nodeRes as RestResponse;
      const protocol = rpcProtocol(req);
      if (protocol) {
        // Connect unary: 404, as for any path that does not exist; the body carries the code.
        sendRpcError(req, res, protocol, new ConnectError(unimplementedReason(req), Code.Unimplemented), {}, 404);
      } else {
        dropUnreadBody(req, res);
        sendText(res, 404, `no such endpoint: ${splitUrl(req.url ?? "/").pathname}`);
      }
    },
  });
  return (req, res) => adapter(req as http.IncomingMessage, res as http.ServerResponse);
}
