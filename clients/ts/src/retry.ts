// When and how patiently calls are retried; the same rules as the Go
// client (pkg/client/retry.go), and which calls may be retried blindly
// from the same table (api/retries/retries.json, as gen/retries.ts), so
// that both behave alike against one gateway.
import { Code, ConnectError } from "@connectrpc/connect";

import { Reason, connectionFailed, isRetryable, reason, retryAfterMs } from "./errors.js";
import { callRetry } from "./gen/retries.js";

/** The attempts of one call, the first included, unless RetryPolicy.maxAttempts says otherwise. */
export const MAX_ATTEMPTS_DEFAULT = 5;

/**
 * How often and how patiently a call is retried.
 *
 * A call is retried only on a refusal that says "later" (isRetryable:
 * Unavailable; ResourceExhausted with reason RATE_LIMITED; Aborted with
 * reason HEAD_BEHIND), and only where a retry cannot change the outcome:
 *
 * - Marks (markReceipts, markRead, markDelivered, readAll,
 *   markThreadRead), message notices, deletions and every read are
 *   retried on all of those: a mark is a max-register write, so one
 *   applied twice leaves the same state ("blind" in gen/retries.ts).
 * - markUnread, markThreadUnread, followThread, unfollowThread,
 *   joinChannel, leaveChannel, updateSettings, setNotifications and
 *   eraseUser take a new version on each attempt: repeating one that was
 *   applied but whose answer was lost could undo a change made in between
 *   (a markUnread that sets `epoch` — the one its first answer gave, or
 *   the one the caller read — changes nothing twice: the caller may
 *   repeat it). They are retried only on refusals given before anything
 *   is written (HEAD_BEHIND, RATE_LIMITED) and when the connection was
 *   refused; on any other failure the caller decides ("once").
 *
 * Each wait is exponential from baseDelayMs, capped at maxDelayMs, ±
 * jitter, and at least the server's Retry-After. A wait that would
 * outlast the call's timeoutMs is not begun, and an abort of its signal
 * ends it: the call then fails with the last refusal.
 */
export interface RetryPolicy {
  /** Attempts of one call, the first included; for a watch, failed reconnects in a row. Default 5; 1 turns retrying off. */
  maxAttempts?: number;
  /** The first wait. Default 100 ms. */
  baseDelayMs?: number;
  /** Bound on one wait before Retry-After raises it. Default 10 s. */
  maxDelayMs?: number;
  /** Each wait is randomised by ± this fraction, so clients refused together do not come back together. Default 0.2. */
  jitter?: number;
  /** Called before each wait: for logs and metrics. */
  onRetry?: (r: RetryInfo) => void;
}

/** A wait before another attempt. */
export interface RetryInfo {
  /** The RPC's method name ("MarkRead", "WatchChannels"). */
  method: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Its failure. */
  error: ConnectError;
  /** The pause before the next attempt, in ms. */
  waitMs: number;
}

/** Whether a failure of method ("MarkRead") is retried (RetryPolicy). A method the table lacks is not retried blindly. */
export function retried(method: string, err: unknown): boolean {
  if (callRetry[method] === "blind") {
    return isRetryable(err);
  }
  if (neverSent(err)) {
    return true;
  }
  const r = reason(err);
  return r === Reason.HeadBehind || r === Reason.RateLimited;
}

/**
 * Whether err is a refused connection: the request never left, so
 * nothing can have been applied. Only Node says so (ECONNREFUSED in the
 * cause chain); a browser's fetch does not tell, so there such a call is
 * not retried.
 */
function neverSent(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if ((e as { code?: unknown }).code === "ECONNREFUSED") {
      return true;
    }
  }
  return false;
}

/** A policy with every default filled in. */
export type FullRetryPolicy = Required<Omit<RetryPolicy, "onRetry">> & Pick<RetryPolicy, "onRetry">;

export function withDefaults(p: RetryPolicy = {}): FullRetryPolicy {
  const full = {
    maxAttempts: p.maxAttempts ?? MAX_ATTEMPTS_DEFAULT,
    baseDelayMs: p.baseDelayMs ?? 100,
    maxDelayMs: p.maxDelayMs ?? 10_000,
    jitter: p.jitter ?? 0.2,
    onRetry: p.onRetry,
  };
  if (!Number.isInteger(full.maxAttempts) || full.maxAttempts < 1) {
    throw new Error(`receipts client: retry.maxAttempts must be an integer >= 1, got ${full.maxAttempts}`);
  }
  if (full.jitter < 0 || full.jitter >= 1) {
    throw new Error(`receipts client: retry.jitter must be in [0, 1), got ${full.jitter}`);
  }
  return full;
}

/** The wait after the failed attempt-th attempt (from 1): backoff, jitter, at least Retry-After. */
export function delayMs(p: FullRetryPolicy, attempt: number, err: unknown): number {
  const exp = Math.min(p.maxDelayMs, p.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  const jittered = exp * (1 + p.jitter * (2 * Math.random() - 1));
  return Math.max(Math.round(jittered), retryAfterMs(err));
}

/** Resolves true after ms, or false as soon as signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve(false);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Per-call options the retry loop reads (connect-es's CallOptions). */
interface Bounds {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * Runs attempt until it succeeds, fails for good, or the policy, the
 * deadline (timeoutMs, over all attempts) or the signal stops it. Each
 * attempt gets the time left of the deadline as its own timeoutMs.
 */
export async function withRetries<T, O extends Bounds>(
  p: FullRetryPolicy,
  method: string,
  opts: O | undefined,
  attempt: (opts: O | undefined) => Promise<T>,
): Promise<T> {
  const timeoutMs = opts?.timeoutMs;
  const deadline = timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
  for (let n = 1; ; n++) {
    const left = deadline === undefined ? undefined : Math.max(1, deadline - Date.now());
    try {
      return await attempt(left === undefined ? opts : { ...opts!, timeoutMs: left });
    } catch (e) {
      const err = ConnectError.from(e);
      if (n >= p.maxAttempts || !retried(method, err) || opts?.signal?.aborted) {
        throw err;
      }
      const wait = delayMs(p, n, err);
      if (deadline !== undefined && Date.now() + wait >= deadline) {
        throw err;
      }
      p.onRetry?.({ method, attempt: n, error: err, waitMs: wait });
      if (!(await sleep(wait, opts?.signal))) {
        throw err;
      }
    }
  }
}

/**
 * Whether err is the stream breaking under the client (not an answer of
 * the server: no error on the wire): resuming is the remedy. connect-node
 * answers a reset connection as Aborted, a cut body as Internal or Unknown.
 */
export function brokenStream(err: ConnectError): boolean {
  if (err.isWireError) {
    return false;
  }
  return connectionFailed(err) || err.code === Code.Unknown || err.code === Code.Internal || err.code === Code.Unavailable || err.code === Code.Aborted;
}
