// A receipts client for Node.js servers (connect-node: HTTP/1.1 or HTTP/2,
// h2c on http://).
import type { Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";

import { bearerToken, createReceiptsClient, type ClientOptions, type ReceiptsClient, type TokenSource } from "./client.js";

export * from "./index.js";

/** Options of a Node.js client. */
export interface NodeClientOptions extends ClientOptions {
  /**
   * Bearer token sent on every call: the chat backend's server token (the
   * gateway's --auth-token-file, with the scopes its calls need), or an
   * end-user token (a JWT) acting for one user; or a function returning
   * the current one. Unset: none.
   */
  token?: TokenSource;
  /** Wire protocol: "connect" (default), "grpc" (HTTP/2 only) or "grpc-web". */
  protocol?: "connect" | "grpc" | "grpc-web";
  /** HTTP version: "1.1" by default, "2" for grpc (h2c on http:// URLs). */
  httpVersion?: "1.1" | "2";
  /** JSON instead of binary protobuf on the wire (easier to read in a proxy; larger). */
  json?: boolean;
  /** More interceptors, run inside the retries (each attempt passes through them). */
  interceptors?: Interceptor[];
}

/** A client of the gateway at baseUrl ("http://127.0.0.1:8080"). */
export function createNodeClient(baseUrl: string, options: NodeClientOptions = {}): ReceiptsClient {
  const interceptors = [...(options.interceptors ?? []), ...(options.token ? [bearerToken(options.token)] : [])];
  const common = { baseUrl, interceptors, useBinaryFormat: !options.json };
  const protocol = options.protocol ?? "connect";
  const transport =
    protocol === "grpc"
      ? createGrpcTransport(common)
      : protocol === "grpc-web"
        ? createGrpcWebTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" })
        : createConnectTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" });
  return createReceiptsClient(transport, options);
}
