// A WatchChannels stream that resumes by itself, like the Go client's
// Watch (pkg/client/watch.go).
import { Code, ConnectError, type CallOptions, type Client } from "@connectrpc/connect";

import type { ReceiptService, WatchEvent } from "./gen/receipts/v1/receipts_pb.js";
import { brokenStream, delayMs, sleep, type FullRetryPolicy } from "./retry.js";
import { isRetryable } from "./errors.js";

/** Options of a watch. */
export interface WatchOptions extends Pick<CallOptions, "headers" | "signal"> {
  /**
   * Resume after this token (the last event's resume_token of an earlier
   * watch); unset, the stream starts with a snapshot of the channels.
   */
  resumeToken?: string;
  /** Called with each event's resume token: store it to pick up where this watch stops. */
  onResumeToken?: (token: string) => void;
}


/**
 * Yields the events of a WatchChannels stream over channelIds until
 * opts.signal aborts (then it returns) or the stream fails for good (then
 * it throws that failure).
 *
 * It keeps the resume token of the last event it received, and when the
 * stream fails retryably (isRetryable: the gateway drained for a restart
 * or lost its store; a broken connection; the server closing the stream)
 * it opens a new one with that token after a backoff wait (the policy's
 * maxAttempts counts failed reconnects in a row; an event received starts
 * the count over). The server resumes right after the token, so across
 * reconnects no update is lost and none comes twice. When the token is
 * too old to resume from, the next event says so (resumeTokenExpired) and
 * carries a snapshot of the channels' ticks instead of the missed
 * updates: replace what you show with it.
 *
 * Heartbeats (events without updates or snapshot) are not yielded.
 * Breaking out of the loop closes the stream.
 */
export async function* watch(
  raw: Client<typeof ReceiptService>,
  policy: FullRetryPolicy,
  channelIds: string[],
  opts: WatchOptions = {},
): AsyncGenerator<WatchEvent, void, undefined> {
  const channelId = [...channelIds];
  const signal = opts.signal;
  let token = opts.resumeToken ?? "";
  let failures = 0;
  while (!signal?.aborted) {
    let err: ConnectError;
    try {
      for await (const ev of raw.watchChannels({ channelId, resumeToken: token }, { signal, headers: opts.headers, timeoutMs: 0 })) {
        if (ev.resumeToken !== "") {
          token = ev.resumeToken;
          opts.onResumeToken?.(token);
        }
        failures = 0;
        if (ev.updates.length === 0 && ev.snapshot.length === 0 && !ev.resumeTokenExpired) {
          continue; // a heartbeat
        }
        yield ev;
      }
      // Watch streams never end by themselves: a stream the server closed
      // without an error is resumed like a dropped one.
      err = new ConnectError("watch stream ended by the server", Code.Unavailable);
    } catch (e) {
      if (signal?.aborted) {
        return;
      }
      err = ConnectError.from(e);
    }
    failures++;
    if (!(isRetryable(err) || brokenStream(err)) || failures >= policy.maxAttempts) {
      throw err;
    }
    const wait = delayMs(policy, failures, err);
    policy.onRetry?.({ method: "WatchChannels", attempt: failures, error: err, waitMs: wait });
    if (!(await sleep(wait, signal))) {
      return;
    }
  }
}
