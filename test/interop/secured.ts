// A Trove server that verifies tokens of an external issuer, with the example insights project
// uploaded and one report generated: what the Connect GET, error-details and reflection suites
// call every service against.

import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { type AuthServer, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { type ExampleProject, generatedReport, uploadExample } from "../insights/api-support.js";

/** Every store, resource and project of account acme, and the report permission. */
export const CLAIMS = {
  trove_account: "acme",
  scope: "stores:admin report:content-insights",
  trove_grants: [
    { store: "*", ops: ["read", "write", "delete"] },
    { project: "project://acme/*", ops: ["read", "write"] },
  ],
};

export interface Secured {
  issuer: Issuer;
  server: AuthServer;
  /** A token with CLAIMS. */
  token: string;
  example: ExampleProject;
  /** The report key of a generated report of the draft environment. */
  report: { reportId: string; projectId: string; environmentId: string };
  /** A Connect (HTTP/1.1) transport sending the token. */
  connect(options?: { useHttpGet?: boolean; interceptors?: Interceptor[] }): Transport;
  /** A gRPC (HTTP/2) transport sending the token. */
  grpc(): Transport;
  stop(): Promise<void>;
}

export const bearer =
  (token: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set("Authorization", `Bearer ${token}`);
    return next(req);
  };

export async function startSecured(): Promise<Secured> {
  const issuer = await startIssuer();
  const server = await startAuthServer(issuer);
  try {
    const token = await issuer.token(CLAIMS);
    const headers = { Authorization: `Bearer ${token}` };
    const example = await uploadExample(server.url, "acme-letters", headers);
    const { id } = await generatedReport(server.url, example.projectID, example.environments.draft, undefined, headers);
    return {
      issuer,
      server,
      token,
      example,
      report: { reportId: id, projectId: example.projectID, environmentId: example.environments.draft },
      connect: (options = {}) =>
        createConnectTransport({
          baseUrl: server.url,
          httpVersion: "1.1",
          useHttpGet: options.useHttpGet,
          interceptors: [bearer(token), ...(options.interceptors ?? [])],
        }),
      grpc: () => createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(token)] }),
      async stop() {
        await server.stop();
        await issuer.stop();
      },
    };
  } catch (err) {
    await server.stop();
    await issuer.stop();
    throw err;
  }
}
