// REST v2 store configuration: /resources/v2/stores and /resources/v2/stores/{name}.

import { create } from "@bufbuild/protobuf";
import { createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import { BadRequestError } from "../domain/errors.js";
import {
  CreateStoreRequestSchema,
  DeleteStoreRequestSchema,
  GetStoreRequestSchema,
  ListStoresRequestSchema,
  type Store,
  StoreSchema,
  StoreService,
  UpdateStoreRequestSchema,
} from "../gen/trove/resources/v2/stores_pb.js";
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

export class StoreRoutes {
  constructor(private readonly core: StoreCore) {}

  async handle(req: RestRequest, res: RestResponse, url: RequestUrl): Promise<void> {
    const rest = url.pathname.slice(STORES_PATH.length);
    if (rest === "" || rest === "/") return this.collection(req, res);
    let name: string;
    try {
      name = decodeURIComponent(rest.slice(1));
    } catch {
      throw new BadRequestError("malformed percent-encoding in the store name");
    }
    return this.single(req, res, name);
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

  private async collection(req: RestRequest, res: RestResponse): Promise<void> {
    if (req.method === "GET" || req.method === "HEAD") {
      const out = await this.core.listStores(
        create(ListStoresRequestSchema),
        this.context(req, res, StoreService.method.listStores),
      );
      send(res, 200, { "Content-Type": XML_TYPE }, req.method === "HEAD" ? undefined : storesDocument(out.stores));
      return;
    }
    if (req.method === "POST") {
      const body = await parseStoreBody(req);
      if (!body.name) throw new BadRequestError("the store needs a name");
      const out = await this.core.createStore(
        create(CreateStoreRequestSchema, { store: toStoreMessage(body, body.name) }),
        this.context(req, res, StoreService.method.createStore),
      );
      const store = out.store as Store;
      send(
        res,
        201,
        { "Content-Type": XML_TYPE, Location: `${STORES_PATH}/${encodeURIComponent(store.name)}` },
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

  private async single(req: RestRequest, res: RestResponse, name: string): Promise<void> {
    switch (req.method) {
      case "GET":
      case "HEAD": {
        const out = await this.core.getStore(
          create(GetStoreRequestSchema, { name }),
          this.context(req, res, StoreService.method.getStore),
        );
        send(
          res,
          200,
          { "Content-Type": XML_TYPE },
          req.method === "HEAD" ? undefined : `${XML_DECLARATION}${storeElement(out.store as Store)}\n`,
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
        const out = await this.core.updateStore(
          create(UpdateStoreRequestSchema, { store: toStoreMessage(body, name) }),
          this.context(req, res, StoreService.method.updateStore),
        );
        send(res, 201, { "Content-Type": XML_TYPE }, `${XML_DECLARATION}${storeElement(out.store as Store)}\n`);
        return;
      }
      case "DELETE":
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
