// StoreService: the core behind the store configuration operations.

import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type CreateStoreRequest,
  type CreateStoreResponse,
  CreateStoreResponseSchema,
  type DeleteStoreRequest,
  type DeleteStoreResponse,
  DeleteStoreResponseSchema,
  type GetStoreRequest,
  type GetStoreResponse,
  GetStoreResponseSchema,
  type ListStoresResponse,
  ListStoresResponseSchema,
  type Store,
  StoreSchema,
  type StoreService,
  type UpdateStoreRequest,
  type UpdateStoreResponse,
  UpdateStoreResponseSchema,
} from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { callerKey, rootOf } from "../auth/caller.js";
import { BadRequestError, NotFoundError } from "../domain/errors.js";
import { validateStoreName } from "../domain/path.js";
import { featuresOf, resolveStoreConfig } from "../domain/store.js";
import type { StoragePort, StoreRecord } from "../storage/port.js";
import { requirePermission } from "./access.js";

/** Permission needed to change store configuration (see docs/auth.md). */
export const STORE_ADMIN = "stores:admin";

export interface StoreServiceOptions {
  storage: StoragePort;
  now?: () => number;
}

/** Reported settings whose value is a secret: never returned in clear. */
const SECRET_SETTINGS = new Set(["database-password"]);

export function redact(name: string, value: string): string {
  if (SECRET_SETTINGS.has(name)) return value === "" ? "" : "********";
  if (name === "database-connection-url") {
    // The password of the user info (up to the last "@" of the authority), and password query parameters (JDBC).
    return value
      .replace(/\/\/([^:/@]*):[^/?#]*@/, "//$1:********@")
      .replace(/([?&;](?:password|pwd)=)[^&;]*/gi, "$1********");
  }
  return value;
}

export class StoreCore implements ServiceImpl<typeof StoreService> {
  private readonly storage: StoragePort;
  private readonly now: () => number;

  constructor(options: StoreServiceOptions) {
    this.storage = options.storage;
    this.now = options.now ?? Date.now;
  }

  async listStores(_req: unknown, ctx: HandlerContext): Promise<ListStoresResponse> {
    const caller = ctx.values.get(callerKey);
    const stores = (await this.storage.listStores()).filter((s) => caller.may("read", rootOf(s.config.name)));
    return create(ListStoresResponseSchema, { stores: stores.map((s) => this.toStore(s)) });
  }

  async createStore(req: CreateStoreRequest, ctx: HandlerContext): Promise<CreateStoreResponse> {
    requirePermission(ctx.values.get(callerKey), STORE_ADMIN);
    const input = this.input(req.store);
    const config = resolveStoreConfig(input, undefined, this.storage.reportedSettings());
    const record = await this.storage.createStore(config, this.now());
    return create(CreateStoreResponseSchema, { store: this.toStore(record) });
  }

  async getStore(req: GetStoreRequest, ctx: HandlerContext): Promise<GetStoreResponse> {
    const name = validateStoreName(req.name);
    if (!ctx.values.get(callerKey).may("read", rootOf(name))) requirePermission(ctx.values.get(callerKey), STORE_ADMIN);
    return create(GetStoreResponseSchema, { store: this.toStore(await this.live(name)) });
  }

  async updateStore(req: UpdateStoreRequest, ctx: HandlerContext): Promise<UpdateStoreResponse> {
    requirePermission(ctx.values.get(callerKey), STORE_ADMIN);
    const input = this.input(req.store);
    const current = await this.live(validateStoreName(input.name));
    const config = resolveStoreConfig(input, current.config, this.storage.reportedSettings());
    const record = await this.storage.updateStore(config, this.now());
    return create(UpdateStoreResponseSchema, { store: this.toStore(record) });
  }

  async deleteStore(req: DeleteStoreRequest, ctx: HandlerContext): Promise<DeleteStoreResponse> {
    requirePermission(ctx.values.get(callerKey), STORE_ADMIN);
    const record = await this.storage.deleteStore(validateStoreName(req.name), this.now());
    return create(DeleteStoreResponseSchema, { store: this.toStore(record) });
  }

  /**
   * The features of a live store, or undefined when there is none. No access check: a face asks
   * it for its own decisions (REST version 1 serves only sync-recursive stores) after checking the
   * caller's access itself, and never returns it as data.
   */
  async featuresOfStore(name: string): Promise<string[] | undefined> {
    const record = await this.storage.getStore(name);
    return record && !record.deleted ? featuresOf(record.config.type) : undefined;
  }

  toStore(record: StoreRecord): Store {
    const reported = this.storage.reportedSettings();
    // A filesystem store's own filesystem-location and filesystem-temp take the place of the
    // deployment's (docs/filesystem-stores.md).
    const own = record.config.settings;
    const settings = [
      ...Object.entries(own),
      ...Object.entries(reported)
        .filter(([name]) => !(name in own))
        .map(([name, value]) => [name, redact(name, value)] as const),
    ].map(([name, value]) => ({ name, value }));
    return create(StoreSchema, {
      name: record.config.name,
      type: record.config.type,
      tag: record.rootTag,
      deleted: record.deleted,
      features: featuresOf(record.config.type),
      settings,
      lastEventId: BigInt(record.lastEventId),
    });
  }

  private input(store: Store | undefined) {
    if (!store) throw new BadRequestError("a store is required");
    // A client may send back a listing it read: a redacted value there stands for the value it hides.
    const reported = this.storage.reportedSettings();
    const settings = store.settings.map(({ name, value }) => {
      const actual = reported[name];
      return { name, value: actual !== undefined && value === redact(name, actual) ? actual : value };
    });
    return { name: store.name, type: store.type, settings };
  }

  private async live(name: string): Promise<StoreRecord> {
    const record = await this.storage.getStore(name);
    if (!record || record.deleted) throw new NotFoundError(`store ${name} not found`);
    return record;
  }
}
