// @trove/sdk/cli: the `trove` client commands, for the bin and for the server package's CLI.

export { type CliConfig, defaultConfigFile, resolveConfig, tokenProviderOf, UsageError } from "./config.js";
export { type CliHost, type CliIo, EXIT, HELP, type HostCommand, run } from "./main.js";
export { bytes, createProgress, type Progress } from "./progress.js";
export { SDK_VERSION } from "./version.js";
