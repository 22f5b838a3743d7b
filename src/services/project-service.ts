// ProjectService: projects, their environments, and promotion between environments
// (the application flow content-insights-service.md leaves out; docs/insights.md).

import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import {
  type CreateEnvironmentRequest,
  type CreateEnvironmentResponse,
  CreateEnvironmentResponseSchema,
  type CreateProjectRequest,
  type CreateProjectResponse,
  CreateProjectResponseSchema,
  type Environment,
  EnvironmentSchema,
  type GetEnvironmentRequest,
  type GetEnvironmentResponse,
  GetEnvironmentResponseSchema,
  type GetProjectRequest,
  type GetProjectResponse,
  GetProjectResponseSchema,
  type ListEnvironmentsRequest,
  type ListEnvironmentsResponse,
  ListEnvironmentsResponseSchema,
  type ListProjectsResponse,
  ListProjectsResponseSchema,
  type Project,
  ProjectSchema,
  type ProjectService,
  type PromotedResource,
  PromotedResourceSchema,
  type PromoteRequest,
  type PromoteResponse,
  PromoteResponseSchema,
} from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { type Caller, callerKey, rootOf } from "../auth/caller.js";
import { AlreadyExistsError, BadRequestError, NotFoundError, PermissionDeniedError } from "../domain/errors.js";
import { parseTagList } from "../domain/etag.js";
import { ancestorsOf, parsePath, validateStoreName } from "../domain/path.js";
import { projectUri, validateAccountName, validateEnvironmentName, validateProjectName } from "../domain/project.js";
import { isExpiredTombstone } from "../domain/rules.js";
import { resolveStoreConfig } from "../domain/store.js";
import { isUuid } from "../insights/report-request.js";
import { toConnectError } from "../rpc/connect-errors.js";
import type { EnvironmentRecord, NodeRecord, ProjectRecord, StoragePort } from "../storage/port.js";
import { requireOperation } from "./access.js";
import { fieldName, inFaceNames } from "./field-names.js";
import type { ResourceCore } from "./resource-service.js";

export interface ProjectServiceOptions {
  storage: StoragePort;
  /** The write path promotion goes through. */
  resources: ResourceCore;
  now?: () => number;
}

/** Reads of a project need read access on it; changes need full (read and write) access. */
export type ProjectAccess = "read" | "full";

export function requireProjectAccess(
  caller: Caller,
  project: { account: string; name: string },
  access: ProjectAccess,
) {
  const read = caller.mayProject("read", project.account, project.name);
  if (read && (access === "read" || caller.mayProject("write", project.account, project.name))) return;
  const needed = access === "read" ? "read access" : "full (read and write) access";
  throw new PermissionDeniedError(`${caller.subject} needs ${needed} on ${projectUri(project.account, project.name)}`);
}

/** Checks a UUID input, naming the field as the caller's face does; returns it in lower case. */
export function uuidInput(field: string, value: string): string {
  if (value === "") throw new BadRequestError(`${field} is required`);
  if (!isUuid(value)) {
    throw new BadRequestError(`${field} must be a UUID (8-4-4-4-12 hexadecimal digits), not ${JSON.stringify(value)}`);
  }
  return value.toLowerCase();
}

export function toProject(record: ProjectRecord): Project {
  return create(ProjectSchema, {
    id: record.id,
    name: record.name,
    account: record.account,
    store: record.store,
    created: timestampFromMs(record.created),
    creator: record.creator,
  });
}

export function toEnvironment(record: EnvironmentRecord): Environment {
  return create(EnvironmentSchema, {
    id: record.id,
    projectId: record.projectId,
    name: record.name,
    created: timestampFromMs(record.created),
    creator: record.creator,
  });
}

export class ProjectCore implements ServiceImpl<typeof ProjectService> {
  private readonly storage: StoragePort;
  private readonly resources: ResourceCore;
  private readonly now: () => number;

  constructor(options: ProjectServiceOptions) {
    this.storage = options.storage;
    this.resources = options.resources;
    this.now = options.now ?? Date.now;
  }

  async createProject(req: CreateProjectRequest, ctx: HandlerContext): Promise<CreateProjectResponse> {
    const caller = ctx.values.get(callerKey);
    const name = validateProjectName(req.name);
    const accountName = req.account === "" ? caller.account : req.account;
    if (accountName === "") {
      throw new BadRequestError("account is required: the caller's token names no account (claim trove_account)");
    }
    const account = validateAccountName(accountName);
    requireProjectAccess(caller, { account, name }, "full");
    const store = validateStoreName(req.store === "" ? name : req.store);
    const projects = await this.storage.insights.listProjects();
    const holder = projects.find((p) => p.store === store);
    if (holder) {
      throw new AlreadyExistsError(`store ${store} already holds project ${projectUri(holder.account, holder.name)}`);
    }
    const existing = await this.storage.getStore(store);
    if (existing && !existing.deleted && !caller.may("write", rootOf(store))) {
      throw new PermissionDeniedError(`${caller.subject} may not write store ${store}, which the project would use`);
    }
    const record: ProjectRecord = {
      id: randomUUID(),
      name,
      account,
      store,
      created: this.now(),
      creator: caller.subject,
    };
    // The record first: its (account, name) is unique. A crash before the store exists is
    // repaired by the first environment, which makes sure of the store again.
    await this.storage.insights.createProject(record);
    await this.ensureStore(store);
    return create(CreateProjectResponseSchema, { project: toProject(record) });
  }

  async getProject(req: GetProjectRequest, ctx: HandlerContext): Promise<GetProjectResponse> {
    const project = await this.project(req.projectId, ctx, "read");
    return create(GetProjectResponseSchema, { project: toProject(project) });
  }

  async listProjects(_req: unknown, ctx: HandlerContext): Promise<ListProjectsResponse> {
    const caller = ctx.values.get(callerKey);
    const projects = (await this.storage.insights.listProjects()).filter((p) =>
      caller.mayProject("read", p.account, p.name),
    );
    return create(ListProjectsResponseSchema, { projects: projects.map(toProject) });
  }

  async createEnvironment(req: CreateEnvironmentRequest, ctx: HandlerContext): Promise<CreateEnvironmentResponse> {
    const caller = ctx.values.get(callerKey);
    const project = await this.project(req.projectId, ctx, "full");
    const name = validateEnvironmentName(req.name);
    // The environment is a top-level directory of the project's store, made or adopted as a
    // PUT of that directory would be: the same grant (docs/auth.md).
    if (!caller.may("write", { store: project.store, path: name, directory: true })) {
      throw new PermissionDeniedError(
        `${caller.subject} may not write /${name} in store ${project.store}, the environment's directory`,
      );
    }
    await this.ensureStore(project.store);
    // The directory first (idempotent); then the record, whose (project, name) is unique.
    await this.storage.makeDirectory(project.store, name, {}, this.now());
    const record: EnvironmentRecord = {
      id: randomUUID(),
      projectId: project.id,
      name,
      created: this.now(),
      creator: caller.subject,
    };
    await this.storage.insights.createEnvironment(record);
    return create(CreateEnvironmentResponseSchema, { environment: toEnvironment(record) });
  }

  async getEnvironment(req: GetEnvironmentRequest, ctx: HandlerContext): Promise<GetEnvironmentResponse> {
    const project = await this.project(req.projectId, ctx, "read");
    const environment = await this.environment(project, req.environmentId, ctx);
    return create(GetEnvironmentResponseSchema, { environment: toEnvironment(environment) });
  }

  async listEnvironments(req: ListEnvironmentsRequest, ctx: HandlerContext): Promise<ListEnvironmentsResponse> {
    const project = await this.project(req.projectId, ctx, "read");
    const environments = await this.storage.insights.listEnvironments(project.id);
    return create(ListEnvironmentsResponseSchema, { environments: environments.map(toEnvironment) });
  }

  async promote(req: PromoteRequest, ctx: HandlerContext): Promise<PromoteResponse> {
    const caller = ctx.values.get(callerKey);
    const project = await this.project(req.projectId, ctx, "full");
    const from = await this.environment(project, req.fromEnvironmentId, ctx, "from_environment_id");
    const to = await this.environment(project, req.toEnvironmentId, ctx, "to_environment_id");
    if (from.id === to.id) {
      const names = `${fieldName(ctx, "from_environment_id")} and ${fieldName(ctx, "to_environment_id")}`;
      throw new BadRequestError(`${names} are the same environment`);
    }
    const items = req.resources.map((item) => ({
      path: parsePath(item.path),
      ifMatch: item.ifMatch === "" ? [] : parseTagList(item.ifMatch),
    }));
    for (const item of items) {
      if (item.path === "")
        throw new BadRequestError("a promoted path names a resource or a directory, not the environment");
    }
    const store = project.store;
    const date = this.now();
    const results: PromotedResource[] = [];
    const promoteOne = async (path: string, ifMatch: string[]) => {
      try {
        const tag = await this.promoteFile(caller, store, from.name, to, path, ifMatch, date);
        results.push(create(PromotedResourceSchema, { path: `/${path}`, tag }));
      } catch (err) {
        const error = toConnectError(inFaceNames(err, ctx));
        if (error.code === Code.Unavailable || error.code === Code.Internal) throw error;
        results.push(
          create(PromotedResourceSchema, { path: `/${path}`, error: error.rawMessage, code: codeToString(error.code) }),
        );
      }
    };
    const targets = items.length > 0 ? items : [{ path: "", ifMatch: [] as string[] }];
    for (const item of targets) {
      const sourcePath = item.path === "" ? from.name : `${from.name}/${item.path}`;
      // What the caller may not read is answered as GET would answer it, before it is looked up.
      if (!caller.may("read", { store, path: sourcePath })) {
        await promoteOne(item.path, item.ifMatch);
        continue;
      }
      const source = item.path === "" ? undefined : await this.sourceNode(store, sourcePath);
      if (source?.directory === false) {
        await promoteOne(item.path, item.ifMatch);
        continue;
      }
      if (item.ifMatch.length > 0) {
        throw new BadRequestError(
          `/${item.path} is a directory: ${fieldName(ctx, "resources.if_match")} applies to one resource`,
        );
      }
      if (item.path !== "" && source === undefined) {
        await promoteOne(item.path, item.ifMatch); // answers "not found" in its result
        continue;
      }
      // A directory (or the whole environment): every file below it the caller may read, in path
      // order; the others are not promoted and not named, as a recursive listing leaves them out.
      for await (const batch of this.storage.listNodes(store, sourcePath, { recursive: true, includeDeleted: false })) {
        for (const node of batch) {
          if (!node.directory && caller.may("read", node)) await promoteOne(node.path.slice(from.name.length + 1), []);
        }
      }
    }
    const failed = results.filter((r) => r.error !== "").length;
    return create(PromoteResponseSchema, {
      promotedDate: timestampFromMs(date),
      promotedBy: caller.subject,
      resources: results,
      promotedCount: results.length - failed,
      failedCount: failed,
    });
  }

  /** Copies one file from the source environment through the normal write path; returns the new tag. */
  private async promoteFile(
    caller: Caller,
    store: string,
    fromName: string,
    to: EnvironmentRecord,
    path: string,
    ifMatch: string[],
    date: number,
  ): Promise<string> {
    const sourcePath = `${fromName}/${path}`;
    const targetPath = `${to.name}/${path}`;
    requireOperation(caller, "read", { store, path: sourcePath });
    requireOperation(caller, "write", { store, path: targetPath });
    const source = await this.sourceNode(store, sourcePath);
    if (!source) throw new NotFoundError(`/${path} not found in environment ${fromName}`);
    requireOperation(caller, "read", source);
    if (source.directory) throw new BadRequestError(`/${path} is a directory`);
    // The directories on the way, as a client would make them before its PUT, and with the grant
    // such a PUT needs for each one that does not exist yet.
    for (const dir of ancestorsOf(targetPath).reverse()) {
      if (dir !== to.name && !dir.startsWith(`${to.name}/`)) continue;
      if (!caller.may("write", { store, path: dir, directory: true }) && !(await this.isDirectory(store, dir))) {
        throw new PermissionDeniedError(`${caller.subject} may not create the directory /${dir} in store ${store}`);
      }
      await this.storage.makeDirectory(store, dir, {}, date);
    }
    // The source's size is known: a small one is stored without the check before the upload
    // (ResourceCore.storeContents), and a source blob that does not hold its size is refused.
    const written = await this.resources.storeContents(store, targetPath, this.storage.readBlob(source), {
      type: source.type,
      ifMatch,
      contentLength: BigInt(source.size),
    });
    await this.storage.insights.recordPromotion({ environmentId: to.id, path: `/${path}`, date, by: caller.subject });
    return written.resource?.tag ?? "";
  }

  private async sourceNode(store: string, path: string): Promise<NodeRecord | undefined> {
    const found = await this.storage.getStoreNode(store, path, { contents: true });
    if (!found) throw new NotFoundError(`store ${store} not found`);
    const node = found.node;
    if (!node || node.deleted || isExpiredTombstone(node, found.config, this.now())) return undefined;
    return node;
  }

  private async isDirectory(store: string, path: string): Promise<boolean> {
    const node = await this.sourceNode(store, path);
    return node?.directory === true;
  }

  private async ensureStore(store: string): Promise<void> {
    const existing = await this.storage.getStore(store);
    if (existing && !existing.deleted) return;
    const config = resolveStoreConfig({ name: store }, undefined, this.storage.reportedSettings());
    try {
      await this.storage.createStore(config, this.now());
    } catch (err) {
      // Another request made it first: what was wanted.
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
  }

  /** The project of an input ID, if the caller has the access asked for. */
  async project(id: string, ctx: HandlerContext, access: ProjectAccess): Promise<ProjectRecord> {
    const caller = ctx.values.get(callerKey);
    const projectId = uuidInput(fieldName(ctx, "project_id"), id);
    const project = await this.storage.insights.getProject(projectId);
    if (!project) throw new NotFoundError(`project ${projectId} not found`);
    requireProjectAccess(caller, project, access);
    return project;
  }

  /** An environment of the project; one of another project is "not found" too. */
  async environment(
    project: ProjectRecord,
    id: string,
    ctx: HandlerContext,
    field = "environment_id",
  ): Promise<EnvironmentRecord> {
    const environmentId = uuidInput(fieldName(ctx, field), id);
    const environment = await this.storage.insights.getEnvironment(environmentId);
    if (!environment || environment.projectId !== project.id) {
      throw new NotFoundError(`environment ${environmentId} not found in project ${project.name}`);
    }
    return environment;
  }
}
