// A receipts client for browsers (connect-web, over fetch). A page on
// another origin than the gateway needs the gateway to allow it
// (--cors-allowed-origins).
import type { Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

import { bearerToken, createReceiptsClient, type ClientOptions, type ReceiptsClient } from "./client.js";

export * from "./index.js";

/** Options of a browser client. */
export interface WebClientOptions extends ClientOptions {
  /** Bearer token sent on every call; unset: none (e.g. a same-origin proxy adds it). */
  token?: string;
  /** Wire protocol: "connect" (default) or "grpc-web". */
  protocol?: "connect" | "grpc-web";
  /** JSON instead of binary protobuf on the wire. */
  json?: boolean;
  /** More interceptors, run inside the retries. */
  interceptors?: Interceptor[];
}

/** A client of the gateway at baseUrl ("https://receipts.example.com"). */
export function createWebClient(baseUrl: string, options: WebClientOptions = {}): ReceiptsClient {
  const interceptors = [...(options.interceptors ?? []), ...(options.token ? [bearerToken(options.token)] : [])];
  const common = { baseUrl, interceptors, useBinaryFormat: !options.json };
  const transport = options.protocol === "grpc-web" ? createGrpcWebTransport(common) : createConnectTransport(common);
  return createReceiptsClient(transport, options);
}
