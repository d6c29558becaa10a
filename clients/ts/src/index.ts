// The receipts API client for Node.js and browsers. The transport-neutral
// core; "@readstate/receipts-client/node" and ".../web" build a client for
// each.
export { createReceiptsClient, bearerToken, type ClientOptions, type PageOptions, type ReceiptsClient, type TokenSource } from "./client.js";
export { DOMAIN, Reason, connectionFailed, errorInfo, isRetryable, reason, retryAfterMs, type ErrorInfo } from "./errors.js";
export { MAX_ATTEMPTS_DEFAULT, retried, type RetryInfo, type RetryPolicy } from "./retry.js";
export { paginate } from "./pages.js";
export type { WatchOptions } from "./watch.js";
export { durabilityName, summarize, type Outcome } from "./durability.js";
export * from "./gen/receipts/v1/receipts_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";
