// The error helpers on refusals built here (no stack needed): every way
// the gateway can say "retry after", and ErrorInfo of other domains.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BinaryWriter } from "@bufbuild/protobuf/wire";

import { readFileSync } from "node:fs";

import { Code, ConnectError, Reason, ReceiptService, errorInfo, isRetryable, reason, retried, retryAfterMs } from "../src/index.js";
import { callRetry } from "../src/gen/retries.js";

function refusal(code: Code, info?: { reason: string; domain?: string; metadata?: Record<string, string> }, headers?: HeadersInit): ConnectError {
  const err = new ConnectError("refused", code, headers);
  if (info) {
    const w = new BinaryWriter().tag(1, 2).string(info.reason).tag(2, 2).string(info.domain ?? "receipts.v1");
    for (const [k, v] of Object.entries(info.metadata ?? {})) {
      w.tag(3, 2).bytes(new BinaryWriter().tag(1, 2).string(k).tag(2, 2).string(v).finish());
    }
    // As the wire delivers it.
    err.details.push({ type: "google.rpc.ErrorInfo", value: w.finish() });
  }
  return err;
}

test("reason and metadata come from the receipts.v1 ErrorInfo only", () => {
  const err = refusal(Code.InvalidArgument, { reason: Reason.InvalidId, metadata: { field: "user_id" } });
  assert.equal(reason(err), "INVALID_ID");
  assert.deepEqual(errorInfo(err)?.metadata, { field: "user_id" });
  assert.equal(reason(refusal(Code.InvalidArgument, { reason: "X", domain: "other.v1" })), "");
  assert.equal(reason(new Error("plain")), "");
  assert.equal(reason(undefined), "");
});

test("Retry-After: the header first, then retry_after_seconds, capped at an hour", () => {
  const both = refusal(Code.Unavailable, { reason: Reason.Unavailable, metadata: { retry_after_seconds: "7" } }, { "Retry-After": "2" });
  assert.equal(retryAfterMs(both), 2000);
  assert.equal(retryAfterMs(refusal(Code.Unavailable, { reason: Reason.Unavailable, metadata: { retry_after_seconds: "7" } })), 7000);
  const date = new Date(Date.now() + 30_000).toUTCString();
  const ms = retryAfterMs(refusal(Code.Unavailable, undefined, { "Retry-After": date }));
  assert.ok(ms > 28_000 && ms <= 30_000, `an HTTP date 30 s ahead gave ${ms} ms`);
  assert.equal(retryAfterMs(refusal(Code.Unavailable, undefined, { "Retry-After": "99999999" })), 3_600_000);
  assert.equal(retryAfterMs(refusal(Code.Unavailable, undefined, { "Retry-After": "soon" })), 0);
  assert.equal(retryAfterMs(refusal(Code.Unavailable)), 0);
});

test("what is retryable, and what is retried for calls that must not repeat", () => {
  assert.equal(isRetryable(refusal(Code.Unavailable)), true);
  assert.equal(isRetryable(refusal(Code.ResourceExhausted, { reason: Reason.RateLimited })), true);
  assert.equal(isRetryable(refusal(Code.ResourceExhausted, { reason: Reason.StreamLimit })), false);
  assert.equal(isRetryable(refusal(Code.ResourceExhausted, { reason: Reason.StreamLimit }, { "Retry-After": "1" })), true);
  assert.equal(isRetryable(refusal(Code.Aborted, { reason: Reason.HeadBehind })), true);
  assert.equal(isRetryable(refusal(Code.Aborted, { reason: Reason.StaleEpoch })), false);
  assert.equal(isRetryable(ConnectError.from(new TypeError("Failed to fetch"))), true, "a browser's failed fetch");
  const reset = new ConnectError("read ECONNRESET", Code.Aborted, undefined, undefined, Object.assign(new Error("reset"), { code: "ECONNRESET" }));
  assert.equal(isRetryable(reset), true, "a connection reset (connect-node says Aborted)");
  for (const code of [Code.InvalidArgument, Code.PermissionDenied, Code.Unauthenticated, Code.NotFound, Code.FailedPrecondition]) {
    assert.equal(isRetryable(refusal(code, { reason: Reason.HeadBehind })), false, Code[code]);
  }

  const lost = refusal(Code.Unavailable, { reason: Reason.Unavailable });
  assert.equal(retried("MarkRead", lost), true);
  assert.equal(retried("MarkUnread", lost), false, "an answer lost after the write: the caller decides");
  assert.equal(retried("MarkUnread", refusal(Code.Aborted, { reason: Reason.HeadBehind })), true);
  assert.equal(retried("JoinChannel", refusal(Code.ResourceExhausted, { reason: Reason.RateLimited })), true);
  const refused = new ConnectError("connect ECONNREFUSED", Code.Unavailable, undefined, undefined, Object.assign(new Error("refused"), { code: "ECONNREFUSED" }));
  assert.equal(retried("EraseUser", refused), true, "never sent");
});

test("which calls are retried blindly is the Go client's table, for every method", () => {
  // The one table, as the Go client embeds it; gen/retries.ts is its copy.
  const table = JSON.parse(readFileSync(new URL("../../../../api/retries/retries.json", import.meta.url), "utf8")) as {
    methods: Record<string, string>;
  };
  assert.deepEqual({ ...callRetry }, table.methods, "gen/retries.ts is stale: run make generate");
  const lost = refusal(Code.Unavailable, { reason: Reason.Unavailable });
  const beforeWrite = refusal(Code.ResourceExhausted, { reason: Reason.RateLimited });
  const names = ReceiptService.methods.map((m) => m.name);
  assert.deepEqual(Object.keys(table.methods).sort(), [...names].sort(), "every method of the service, none that is gone");
  for (const m of names) {
    assert.equal(retried(m, lost), table.methods[m] === "blind", m);
    assert.equal(retried(m, beforeWrite), true, m);
  }
  for (const m of ["FollowThread", "UnfollowThread", "MarkThreadUnread", "MarkUnread"]) {
    assert.equal(retried(m, lost), false, `${m} is never repeated blindly`);
  }
  assert.equal(retried("SomeNewCall", lost), false, "a call the table lacks is not repeated blindly");
});
