// @trove/sdk/rest: the REST client (v2, or v1), its listing, history and feed types.

export {
  API_VERSIONS,
  type ApiVersion,
  type Body,
  createRestClient,
  formatMoment,
  type GetOptions,
  type GetResult,
  type GetVersionOptions,
  type HeadResult,
  type Listing,
  type ListingStream,
  type ListOptions,
  type ListVersionsOptions,
  type Moment,
  type PollOptions,
  type PutOptions,
  type PutResult,
  type RequestOptions,
  type ResourceInfo,
  type RestClientOptions,
  type RestoreAsOfOptions,
  type RestoreOptions,
  resourcePath,
  type StoreInput,
  StoresApi,
  TroveRestClient,
  unquoteTag,
} from "./client.js";
export { createH2cFetch, type H2cFetch, type H2cFetchOptions } from "./h2c-fetch.js";
export { type FeedChange, type FeedEvent, type FeedReset, parseFeed, parseFeedLine, parseIdrUri } from "./poll.js";
export type { ReadManyOptions, ReadManyResult } from "./read-many.js";
export type { WriteManyAnswer, WriteManyFile, WriteManyOptions } from "./write-many.js";
export {
  type ListingEntry,
  ListingReader,
  parseListing,
  parseRestore,
  parseStores,
  parseVersions,
  type StoreInfo,
  type SubtreeChange,
  type SubtreeRestore,
  type VersionEntry,
} from "./xml.js";
