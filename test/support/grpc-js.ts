// Trove's v2 services as stock @grpc/grpc-js clients see them: loaded from proto/ at run time by
// @grpc/proto-loader (no generated code), for the interop and large-body tests.

import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const PROTO_DIR = fileURLToPath(new URL("../../proto", import.meta.url));

/** The client constructors of trove.resources.v2's ResourceService and StoreService. */
export function stockServices(): Record<"ResourceService" | "StoreService", grpc.ServiceClientConstructor> {
  const definition = protoLoader.loadSync(["trove/resources/v2/resources.proto", "trove/resources/v2/stores.proto"], {
    includeDirs: [PROTO_DIR],
    longs: String,
    defaults: true,
    oneofs: true,
  });
  return (
    grpc.loadPackageDefinition(definition) as unknown as {
      trove: { resources: { v2: Record<"ResourceService" | "StoreService", grpc.ServiceClientConstructor> } };
    }
  ).trove.resources.v2;
}
