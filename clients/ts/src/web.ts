// A receipts client for browsers (connect-web, over fetch), with the
// signed-in user's end-user token: a JWT the gateway verifies
// (--auth-jwt-hs256-key-file, or --auth-jwks-url for RS256/ES256) that
// acts on its own user only. A page on another origin than the gateway
// needs the gateway to allow it (--cors-allowed-origins).
import type { Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

import { bearerToken, createReceiptsClient, type ClientOptions, type ReceiptsClient, type TokenSource } from "./client.js";

export * from "./index.js";

/** Options of a browser client. */
export interface WebClientOptions extends ClientOptions {
  /**
   * The signed-in user's end-user token (a JWT whose sub is the user),
   * or a function returning the current one (asked before each attempt:
   * refresh it there). It marks, reads counts and inbox, threads and
   * settings of its own user, and watches or reads receipts only of
   * channels its user is a member of; anything else is refused
   * (NOT_YOUR_USER, NOT_A_MEMBER, SCOPE_MISSING). Never a server token
   * (--auth-token-file): whoever opens the page can read it. Unset: none
   * (e.g. a same-origin proxy adds it).
   */
  token?: TokenSource;
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
