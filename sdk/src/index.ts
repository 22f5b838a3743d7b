// @trove/sdk: typed clients for Trove. The generated service descriptors and
// messages, Connect clients for every service (createTroveClient), the REST v2
// client (createRestClient), the insights client (createInsightsClient), token providers,
// typed errors, the mirror, and push/pull of directories.

export * from "./auth.js";
export * from "./client.js";
export * from "./errors.js";
export * from "./gen/trove/resources/v2/changes_pb.js";
export * from "./gen/trove/resources/v2/resources_pb.js";
export * from "./gen/trove/resources/v2/stores_pb.js";
export * from "./insights.js";
export * as insightsV1 from "./insights-v1.js";
export * from "./mirror/index.js";
export * from "./rest/index.js";
export { SERVICES } from "./services.js";
export * from "./transfer/index.js";
