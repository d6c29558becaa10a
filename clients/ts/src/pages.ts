// Paged lists (AIP-158: page_size and page_token in, next_page_token out,
// empty on the last page) as async iterators: a page is fetched when the
// loop reaches it, and breaking out fetches nothing more.
import type { CallOptions, Client } from "@connectrpc/connect";

import type { ChannelState, ChannelUnread, GetChannelResponse, GetReadStateResponse, GetUnreadResponse, ReceiptService } from "./gen/receipts/v1/receipts_pb.js";
import type { PageOptions } from "./client.js";

/**
 * Yields each page of a paged list: fetch(token) returns the page at
 * token ("" for the first). A server that hands out the same token twice
 * ends it with an error rather than looping forever.
 */
export async function* paginate<P extends { nextPageToken: string }>(fetch: (pageToken: string) => Promise<P>): AsyncGenerator<P, void, undefined> {
  const seen = new Set<string>();
  let token = "";
  for (;;) {
    const page = await fetch(token);
    yield page;
    token = page.nextPageToken;
    if (token === "") {
      return;
    }
    if (seen.has(token)) {
      throw new Error(`paging: the server returned page token ${JSON.stringify(token)} twice`);
    }
    seen.add(token);
  }
}

type Calls = Client<typeof ReceiptService>;

function callOptions(opts: PageOptions | undefined): CallOptions | undefined {
  if (!opts) {
    return undefined;
  }
  const { pageSize: _, ...rest } = opts;
  return rest;
}

export function channelPages(c: Calls, channelId: string, opts?: PageOptions): AsyncGenerator<GetChannelResponse, void, undefined> {
  return paginate((pageToken) => c.getChannel({ channelId, pageToken, pageSize: opts?.pageSize ?? 0 }, callOptions(opts)));
}

export async function* channelMembers(c: Calls, channelId: string, opts?: PageOptions): AsyncGenerator<string, void, undefined> {
  for await (const page of channelPages(c, channelId, opts)) {
    yield* page.members;
  }
}

export function readStatePages(c: Calls, userId: string, opts?: PageOptions): AsyncGenerator<GetReadStateResponse, void, undefined> {
  return paginate((pageToken) => c.getReadState({ userId, pageToken, pageSize: opts?.pageSize ?? 0 }, callOptions(opts)));
}

export async function* readStateChannels(c: Calls, userId: string, opts?: PageOptions): AsyncGenerator<ChannelState, void, undefined> {
  for await (const page of readStatePages(c, userId, opts)) {
    yield* page.channels;
  }
}

export function unreadPages(c: Calls, userId: string, opts?: PageOptions): AsyncGenerator<GetUnreadResponse, void, undefined> {
  return paginate((pageToken) => c.getUnread({ userId, pageToken, pageSize: opts?.pageSize ?? 0 }, callOptions(opts)));
}

export async function* unreadChannels(c: Calls, userId: string, opts?: PageOptions): AsyncGenerator<ChannelUnread, void, undefined> {
  for await (const page of unreadPages(c, userId, opts)) {
    yield* page.channels;
  }
}
