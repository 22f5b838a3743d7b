// @trove/sdk: typed clients for Trove. The generated service descriptors and
// messages are exported here; the REST client, mirror and CLI follow.

export * from "./gen/trove/resources/v2/resources_pb.js";
export * from "./gen/trove/resources/v2/stores_pb.js";
