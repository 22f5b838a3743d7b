// REST store configuration: /resources/v{1,2}/stores and /resources/v{1,2}/stores/{name}.
// Version 1 neither lists nor serves stores without sync-recursive (version.ts).

import { create } from "@bufbuild/protobuf";
import { createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import {
  CreateStoreRequestSchema,
  DeleteStoreRequestSchema,
  GetStoreRequestSchema,
  ListStoresRequestSchema,
  type Store,
  StoreSchema,
  StoreService,
  UpdateStoreRequestSchema,
} from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { BadRequestError } from "../domain/errors.js";
import { featuresOf, STORE_TYPES, type StoreType } from "../domain/store.js";
import type { StoreCore } from "../services/store-service.js";
import {
  header,
  type RequestUrl,
  type RestRequest,
  type RestResponse,
  readBody,
  requestSignal,
  restContextValues,
  send,
} from "./http.js";
import {
  type ApiVersion,
  notInVersion1,
  prefixOf,
  type StoreFeatures,
  servesStore,
  VERSION_1_FEATURE,
} from "./version.js";
import {
  parseStoreJson,
  parseStoreXml,
  type StoreBody,
  storeElement,
  storesDocument,
  XML_DECLARATION,
  XML_TYPE,
} from "./xml.js";

export const STORES_PATH = "/resources/v2/stores";
/** Largest store configuration body accepted. */
const MAX_BODY = 64 * 1024;

/** Reads a store configuration as JSON or XML, by Content-Type (or by its first character when none is given). */
async function parseStoreBody(req: RestRequest): Promise<StoreBody> {
  const body = await readBody(req, MAX_BODY, "store configuration");
  const type = (header(req, "content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (body.trim() === "")
    throw new BadRequestError("a store configuration body is required (XML or JSON, see docs/rest.md)");
  if (type === "application/json" || (type === "" && body.trimStart().startsWith("{"))) return parseStoreJson(body);
  if (type === "" || type === "application/xml" || type === "text/xml") return parseStoreXml(body);
  throw new BadRequestError(`unsupported Content-Type ${type}: send application/xml or application/json`);
}

function toStoreMessage(body: StoreBody, name: string): Store {
  return create(StoreSchema, { name, type: body.type ?? "", settings: body.settings });
}

/** Refuses, on version 1, a store type whose stores version 1 would not serve. */
function checkVersion1Type(version: ApiVersion, type: string | undefined): void {
  // An unknown type is the core's to refuse; no type keeps the current one or takes the default.
  if (version === 2 || type === undefined || !(STORE_TYPES as readonly string[]).includes(type)) return;
  const features = featuresOf(type as StoreType);
  if (servesStore(version, features)) return;
  throw new BadRequestError(
    `store type ${type} is not served by version 1 of the API: it lacks the ${VERSION_1_FEATURE} feature ` +
      `(its features: ${features.join(", ")}); use /resources/v2/stores`,
  );
}

export class StoreRoutes {
  /** The features of a live store, without an access check: for the routes' version 1 decisions. */
  readonly features: StoreFeatures;

  constructor(private readonly core: StoreCore) {
    this.features = (name) => core.featuresOfStore(name);
  }

  async handle(req: RestRequest, res: RestResponse, url: RequestUrl, version: ApiVersion = 2): Promise<void> {
    const rest = url.pathname.slice(`${prefixOf(version)}/stores`.length);
    if (rest === "" || rest === "/") return this.collection(req, res, version);
    let name: string;
    try {
      name = decodeURIComponent(rest.slice(1));
    } catch {
      throw new BadRequestError("malformed percent-encoding in the store name");
    }
    return this.single(req, res, name, version);
  }

  /** The store, read with the caller's access; on version 1 refused (404) when version 1 does not serve it. */
  private async served(req: RestRequest, res: RestResponse, name: string, version: ApiVersion): Promise<Store> {
    const out = await this.core.getStore(
      create(GetStoreRequestSchema, { name }),
      this.context(req, res, StoreService.method.getStore),
    );
    const store = out.store as Store;
    if (!servesStore(version, store.features)) throw notInVersion1(store.name, store.features);
    return store;
  }

  private context(
    req: RestRequest,
    res: RestResponse,
    method: (typeof StoreService.method)[keyof typeof StoreService.method],
  ): HandlerContext {
    return createHandlerContext({
      service: StoreService,
      method,
      protocolName: "rest",
      requestMethod: req.method ?? "GET",
      url: req.url ?? "",
      requestSignal: requestSignal(res),
      contextValues: restContextValues(req),
    });
  }

  private async collection(req: RestRequest, res: RestResponse, version: ApiVersion): Promise<void> {
    if (req.method === "GET" || req.method === "HEAD") {
      const out = await this.core.listStores(
        create(ListStoresRequestSchema),
        this.context(req, res, StoreService.method.listStores),
      );
      const stores = out.stores.filter((s) => servesStore(version, s.features));
      send(res, 200, { "Content-Type": XML_TYPE }, req.method === "HEAD" ? undefined : storesDocument(stores));
      return;
    }
    if (req.method === "POST") {
      const body = await parseStoreBody(req);
      if (!body.name) throw new BadRequestError("the store needs a name");
      checkVersion1Type(version, body.type);
      const out = await this.core.createStore(
        create(CreateStoreRequestSchema, { store: toStoreMessage(body, body.name) }),
        this.context(req, res, StoreService.method.createStore),
      );
      const store = out.store as Store;
      send(
        res,
        201,
        { "Content-Type": XML_TYPE, Location: `${prefixOf(version)}/stores/${encodeURIComponent(store.name)}` },
        `${XML_DECLARATION}${storeElement(store)}\n`,
      );
      return;
    }
    send(
      res,
      405,
      { Allow: "GET, HEAD, POST", "Content-Type": "text/plain; charset=utf-8" },
      `method ${req.method} not allowed\n`,
    );
  }

  private async single(req: RestRequest, res: RestResponse, name: string, version: ApiVersion): Promise<void> {
    switch (req.method) {
      case "GET":
      case "HEAD": {
        const store = await this.served(req, res, name, version);
        send(
          res,
          200,
          { "Content-Type": XML_TYPE },
          req.method === "HEAD" ? undefined : `${XML_DECLARATION}${storeElement(store)}\n`,
        );
        return;
      }
      case "PUT": {
        const body = await parseStoreBody(req);
        if (body.name && body.name !== name) {
          throw new BadRequestError(
            `the body names store ${body.name}, the URL store ${name}; a store cannot be renamed`,
          );
        }
        if (version === 1) {
          await this.served(req, res, name, version);
          checkVersion1Type(version, body.type);
        }
        const out = await this.core.updateStore(
          create(UpdateStoreRequestSchema, { store: toStoreMessage(body, name) }),
          this.context(req, res, StoreService.method.updateStore),
        );
        send(res, 201, { "Content-Type": XML_TYPE }, `${XML_DECLARATION}${storeElement(out.store as Store)}\n`);
        return;
      }
      case "DELETE":
        if (version === 1) await this.served(req, res, name, version);
        await this.core.deleteStore(
          create(DeleteStoreRequestSchema, { name }),
          this.context(req, res, StoreService.method.deleteStore),
        );
        send(res, 200, {});
        return;
      default:
        send(
          res,
          405,
          { Allow: "GET, HEAD, PUT, DELETE", "Content-Type": "text/plain; charset=utf-8" },
          `method ${req.method} not allowed\n`,
        );
    }
  }
}
