// @trove/sdk/rest: the REST client (v2, or v1), its listing and feed types.

export {
  API_VERSIONS,
  type ApiVersion,
  type Body,
  createRestClient,
  type GetOptions,
  type GetResult,
  type HeadResult,
  type Listing,
  type ListOptions,
  type PollOptions,
  type PutOptions,
  type PutResult,
  type RequestOptions,
  type ResourceInfo,
  type RestClientOptions,
  resourcePath,
  type StoreInput,
  StoresApi,
  TroveRestClient,
  unquoteTag,
} from "./client.js";
export { type FeedChange, type FeedEvent, type FeedReset, parseFeed, parseFeedLine, parseIdrUri } from "./poll.js";
export { type ListingEntry, parseListing, parseStores, type StoreInfo } from "./xml.js";
