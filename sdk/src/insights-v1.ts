// The generated messages and services of trove.insights.v1, exported by the package as the
// namespace `insightsV1` (their names, such as Project, would clash with the REST types).

export * from "./gen/trove/insights/v1/projects_pb.js";
export * from "./gen/trove/insights/v1/reports_pb.js";
