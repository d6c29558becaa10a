// Reading the refusals of the receipts API: every one carries a
// google.rpc.ErrorInfo of domain receipts.v1 with a stable reason (branch
// on it, never on the message) and facts in its metadata.
import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** The ErrorInfo domain of the receipts API's refusals. */
export const DOMAIN = "receipts.v1";

/**
 * The stable reasons of the API's refusals (docs/api.md, "Errors", lists
 * what each means). A newer server may send one not listed here: compare
 * with strings, and treat an unknown reason by its code.
 */
export const Reason = {
  InvalidId: "INVALID_ID",
  InvalidSeq: "INVALID_SEQ",
  InvalidEpoch: "INVALID_EPOCH",
  InvalidKind: "INVALID_KIND",
  InvalidField: "INVALID_FIELD",
  InvalidLevel: "INVALID_LEVEL",
  EmptyRequest: "EMPTY_REQUEST",
  BatchTooLarge: "BATCH_TOO_LARGE",
  BodyTooLarge: "BODY_TOO_LARGE",
  MalformedRequest: "MALFORMED_REQUEST",
  HeadBehind: "HEAD_BEHIND",
  SeqBeyondHead: "SEQ_BEYOND_HEAD",
  DeletionBeyondHead: "DELETION_BEYOND_HEAD",
  EpochAhead: "EPOCH_AHEAD",
  StaleEpoch: "STALE_EPOCH",
  EpochLimit: "EPOCH_LIMIT",
  NotAMember: "NOT_A_MEMBER",
  NotYourUser: "NOT_YOUR_USER",
  CredentialsMissing: "CREDENTIALS_MISSING",
  CredentialsInvalid: "CREDENTIALS_INVALID",
  CredentialsExpired: "CREDENTIALS_EXPIRED",
  ScopeMissing: "SCOPE_MISSING",
  RateLimited: "RATE_LIMITED",
  StreamLimit: "STREAM_LIMIT",
  Unavailable: "UNAVAILABLE",
  NotEnabled: "NOT_ENABLED",
  DeadlineExceeded: "DEADLINE_EXCEEDED",
  Canceled: "CANCELED",
  Internal: "INTERNAL",
} as const;

/** Retry-After values above this are capped: a wild value cannot stall a caller without a deadline for days. */
const maxRetryAfterMs = 3_600_000;

/** google.rpc.ErrorInfo: why a call was refused. */
export interface ErrorInfo {
  /** The stable reason (Reason). */
  reason: string;
  /** Always DOMAIN here. */
  domain: string;
  /** Facts: field (the offending one, in the request's terms), limit, head, scope, retry_after_seconds. */
  metadata: Record<string, string>;
}

/** The receipts.v1 ErrorInfo of err, if it carries one. */
export function errorInfo(err: unknown): ErrorInfo | undefined {
  if (!(err instanceof ConnectError)) {
    return undefined;
  }
  for (const d of err.details) {
    // Details received from the wire are {type, value}; those a caller built are not.
    if ("type" in d && d.value instanceof Uint8Array && (d.type === "google.rpc.ErrorInfo" || d.type === "type.googleapis.com/google.rpc.ErrorInfo")) {
      const info = decodeErrorInfo(d.value);
      if (info?.domain === DOMAIN) {
        return info;
      }
    }
  }
  return undefined;
}

/**
 * Decodes google.rpc.ErrorInfo (reason = 1, domain = 2, metadata = 3, a
 * map<string, string>) by hand: the googleapis copy this repository
 * generates from predates ErrorInfo, and three fields do not justify
 * vendoring a newer one. undefined when the bytes are not one.
 */
function decodeErrorInfo(bytes: Uint8Array): ErrorInfo | undefined {
  const info: ErrorInfo = { reason: "", domain: "", metadata: {} };
  try {
    const r = new BinaryReader(bytes);
    while (r.pos < r.len) {
      const [field, wt] = r.tag();
      if (field === 1 && wt === WireType.LengthDelimited) {
        info.reason = r.string();
      } else if (field === 2 && wt === WireType.LengthDelimited) {
        info.domain = r.string();
      } else if (field === 3 && wt === WireType.LengthDelimited) {
        const entry = new BinaryReader(r.bytes());
        let key = "";
        let value = "";
        while (entry.pos < entry.len) {
          const [f, w] = entry.tag();
          if (f === 1 && w === WireType.LengthDelimited) {
            key = entry.string();
          } else if (f === 2 && w === WireType.LengthDelimited) {
            value = entry.string();
          } else {
            entry.skip(w, f);
          }
        }
        info.metadata[key] = value;
      } else {
        r.skip(wt, field);
      }
    }
  } catch {
    return undefined;
  }
  return info;
}

/**
 * The stable reason of err's ErrorInfo ("HEAD_BEHIND", "INVALID_ID" …),
 * or "" when it carries none (no error, or a failure that never reached
 * the gateway).
 */
export function reason(err: unknown): string {
  return errorInfo(err)?.reason ?? "";
}

/**
 * Whether the same call may succeed later: Unavailable (a store or the
 * gateway cannot answer now), a connection that failed or broke
 * (connectionFailed; in a browser, a failed fetch), ResourceExhausted
 * with reason RATE_LIMITED (or STREAM_LIMIT with a Retry-After: the
 * caller's own watch streams), and Aborted with reason HEAD_BEHIND (the
 * message's notice has not arrived yet). Every other code is the caller's
 * to fix: InvalidArgument, PermissionDenied, Unauthenticated, NotFound,
 * FailedPrecondition … A call that is not idempotent needs more than this
 * to be retried (see RetryPolicy).
 */
export function isRetryable(err: unknown): boolean {
  if (!(err instanceof ConnectError)) {
    return false;
  }
  if (connectionFailed(err)) {
    return true;
  }
  switch (err.code) {
    case Code.Unavailable:
      return true;
    case Code.ResourceExhausted:
      switch (reason(err)) {
        case Reason.RateLimited:
          return true;
        case Reason.StreamLimit:
          return retryAfterMs(err) > 0;
      }
      return false;
    case Code.Aborted:
      return reason(err) === Reason.HeadBehind;
  }
  return false;
}

/** Node's codes of a connection that failed or broke (connect-node answers some as Aborted, not Unavailable). */
const connectionCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "ERR_STREAM_DESTROYED",
  "ERR_HTTP2_INVALID_STREAM",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_SESSION_ERROR",
]);

/**
 * Whether err is the connection failing (not an answer of the server):
 * a Node socket error, or a browser's fetch failing, which says no more
 * than a TypeError (connect-web turns it into Unknown).
 */
export function connectionFailed(err: ConnectError): boolean {
  if (err.isWireError) {
    return false;
  }
  for (let e: unknown = err.cause, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof TypeError || connectionCodes.has(String((e as { code?: unknown }).code))) {
      return true;
    }
  }
  return false;
}

/**
 * The pause in milliseconds the server asked for before a retry: its
 * Retry-After header (a trailer in gRPC), else the ErrorInfo's
 * retry_after_seconds; 0 when it gave none. In a browser the header is
 * readable only when the gateway exposes it (its CORS setup does).
 */
export function retryAfterMs(err: unknown): number {
  if (!(err instanceof ConnectError)) {
    return 0;
  }
  return parseRetryAfter(err.metadata.get("Retry-After")) ?? parseRetryAfter(errorInfo(err)?.metadata["retry_after_seconds"]) ?? 0;
}

/** Delay seconds (what the gateway sends) or an HTTP date, in ms. */
function parseRetryAfter(v: string | null | undefined): number | undefined {
  v = v?.trim();
  if (!v) {
    return undefined;
  }
  if (/^\d+$/.test(v)) {
    return Math.min(Number(v) * 1000, maxRetryAfterMs);
  }
  const at = Date.parse(v);
  if (Number.isNaN(at)) {
    return undefined;
  }
  return Math.min(Math.max(0, at - Date.now()), maxRetryAfterMs);
}
