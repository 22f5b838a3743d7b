// Every Connect service of Trove, by the property name a TroveClient gives it.
// Adding a service to the SDK is one line here.

import { ProjectService } from "./gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "./gen/trove/insights/v1/reports_pb.js";
import { ChangeService } from "./gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "./gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "./gen/trove/resources/v2/stores_pb.js";

export const SERVICES = {
  resources: ResourceService,
  stores: StoreService,
  changes: ChangeService,
  projects: ProjectService,
  reports: ReportService,
} as const;
