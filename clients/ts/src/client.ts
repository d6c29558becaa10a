// The receipts client over any connect-es Transport: the generated client
// of receipts.v1 with retries (retry.ts), paging (pages.ts) and a watch
// that resumes by itself (watch.ts). node.ts and web.ts build the
// transport for Node.js and for browsers.
import { createClient, type CallOptions, type Client, type Interceptor, type Transport } from "@connectrpc/connect";

import { ReceiptService } from "./gen/receipts/v1/receipts_pb.js";
import { channelMembers, channelPages, readStateChannels, readStatePages, unreadChannels, unreadPages } from "./pages.js";
import { withDefaults, withRetries, type FullRetryPolicy, type RetryPolicy } from "./retry.js";
import { watch, type WatchOptions } from "./watch.js";
import type { ChannelState, ChannelUnread, GetChannelResponse, GetReadStateResponse, GetUnreadResponse, WatchEvent } from "./gen/receipts/v1/receipts_pb.js";

/** Options of a receipts client. */
export interface ClientOptions {
  /** Retry policy of unary calls and of a watch's reconnects. */
  retry?: RetryPolicy;
}

/** Options of the paging helpers. */
export interface PageOptions extends CallOptions {
  /** Items per page; 0 or unset: the server's default. */
  pageSize?: number;
}

/**
 * A client of the receipts API. Every RPC of receipts.v1 is a method
 * (markRead, getUnread, watchChannels …), typed from the proto, with
 * retries as RetryPolicy says (watchChannels is the raw stream: use
 * watch). The helpers below page through lists and resume watches.
 */
export interface ReceiptsClient extends Client<typeof ReceiptService> {
  /** The same calls without retries: for callers that retry on their own. */
  readonly raw: Client<typeof ReceiptService>;

  /**
   * Watches channels: yields each event with updates or a snapshot (not
   * heartbeats), and after a retryable failure of the stream opens a new
   * one from the last event's resume token, so nothing is lost or
   * repeated. Ends when opts.signal aborts; throws a failure no retry can
   * change. See watch.ts.
   */
  watch(channelIds: string[], opts?: WatchOptions): AsyncGenerator<WatchEvent, void, undefined>;

  /** The pages of GetChannel: the channel's head and member count, and its members a page at a time (default 100, at most 1,000). */
  channelPages(channelId: string, opts?: PageOptions): AsyncGenerator<GetChannelResponse, void, undefined>;
  /** A channel's members, across pages. */
  channelMembers(channelId: string, opts?: PageOptions): AsyncGenerator<string, void, undefined>;
  /** The pages of a user's default channel set in GetReadState (default 1,000 a page, at most 10,000). */
  readStatePages(userId: string, opts?: PageOptions): AsyncGenerator<GetReadStateResponse, void, undefined>;
  /** Each channel's cursors of a user's default set, across pages. */
  readStateChannels(userId: string, opts?: PageOptions): AsyncGenerator<ChannelState, void, undefined>;
  /** The pages of a user's default set in GetUnread: badge totals are per page, sum them over the pages. */
  unreadPages(userId: string, opts?: PageOptions): AsyncGenerator<GetUnreadResponse, void, undefined>;
  /** Each channel's unread counts of a user's default set, across pages. */
  unreadChannels(userId: string, opts?: PageOptions): AsyncGenerator<ChannelUnread, void, undefined>;
}

/** Creates a client on transport (see createNodeClient and createWebClient for ready-made ones). */
export function createReceiptsClient(transport: Transport, options: ClientOptions = {}): ReceiptsClient {
  const policy = withDefaults(options.retry);
  const raw = createClient(ReceiptService, transport);
  const rawMethods = raw as unknown as Record<string, (req: unknown, opts?: CallOptions) => unknown>;
  const c: Record<string, unknown> = {};
  for (const m of ReceiptService.methods) {
    const call = rawMethods[m.localName];
    c[m.localName] =
      m.methodKind === "unary"
        ? (req: unknown, opts?: CallOptions) => withRetries(policy, m.name, opts, (o) => call(req, o) as Promise<unknown>)
        : call;
  }
  const client = c as unknown as ReceiptsClient;
  return Object.assign(client, {
    raw,
    watch: (channelIds: string[], opts?: WatchOptions) => watch(raw, policy, channelIds, opts),
    channelPages: (channelId: string, opts?: PageOptions) => channelPages(client, channelId, opts),
    channelMembers: (channelId: string, opts?: PageOptions) => channelMembers(client, channelId, opts),
    readStatePages: (userId: string, opts?: PageOptions) => readStatePages(client, userId, opts),
    readStateChannels: (userId: string, opts?: PageOptions) => readStateChannels(client, userId, opts),
    unreadPages: (userId: string, opts?: PageOptions) => unreadPages(client, userId, opts),
    unreadChannels: (userId: string, opts?: PageOptions) => unreadChannels(client, userId, opts),
  });
}

/**
 * A bearer token: the token itself, or a function that returns the
 * current one (asked before every attempt of every call and every watch
 * reconnect, so a refreshed end-user token is picked up: an expired one
 * is refused with reason CREDENTIALS_EXPIRED).
 */
export type TokenSource = string | (() => string | Promise<string>);

/**
 * Sets "Authorization: Bearer <token>" on every call, unary or streaming:
 * a server token (the gateway's --auth-token-file) on a server, an
 * end-user token (a JWT for the signed-in user) in a browser or app.
 */
export function bearerToken(token: TokenSource): Interceptor {
  return (next) => async (req) => {
    req.header.set("Authorization", `Bearer ${typeof token === "function" ? await token() : token}`);
    return next(req);
  };
}

export type { FullRetryPolicy };
