// @trove/sdk/cli: the `trove` client commands, for the bin and for the server package's CLI.

export { type CliConfig, defaultConfigFile, resolveConfig, tokenProviderOf } from "./config.js";
export { type CliIo, EXIT, HELP, run } from "./main.js";
export { SDK_VERSION } from "./version.js";
