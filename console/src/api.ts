// The Trove APIs the console uses, as any client would: the generated Connect clients (the SDK's
// descriptors, sdk/src/gen) over fetch, with the session's bearer token on every call.

import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { SERVICES } from "../../sdk/src/services.js";
import type { Session } from "./auth/session.js";

export type Clients = { [K in keyof typeof SERVICES]: Client<(typeof SERVICES)[K]> };

export function createClients(session: Session): Clients {
  const bearer: Interceptor = (next) => (req) => {
    const token = session.token;
    if (token) req.header.set("Authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: location.origin,
    useBinaryFormat: true,
    interceptors: [bearer],
  });
  return {
    resources: createClient(SERVICES.resources, transport),
    stores: createClient(SERVICES.stores, transport),
    changes: createClient(SERVICES.changes, transport),
    projects: createClient(SERVICES.projects, transport),
    reports: createClient(SERVICES.reports, transport),
  };
}
