// @trove/sdk/transfer: push a local directory to a store and pull a store's directory into a
// local one, transferring only what differs (rclone's copy, and sync with `delete`).

export { pull } from "./pull.js";
export { push } from "./push.js";
export {
  isTransferChangedError,
  isTransferRefusedError,
  MAX_TRANSFERS,
  type TransferAction,
  TransferChangedError,
  type TransferFailure,
  type TransferOptions,
  type TransferProgress,
  TransferRefusedError,
  type TransferSummary,
} from "./transfer.js";
