// @trove/sdk/errors: the typed errors (trove-errors.ts) and fromConnectError (connect-errors.ts).
// Modules of the SDK import those two directly, so that REST-only code loads no Connect.

export { fromConnectError } from "./connect-errors.js";
export * from "./trove-errors.js";
