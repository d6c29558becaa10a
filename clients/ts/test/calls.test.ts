// Unary calls against the real gateway: a mark's round trip and its
// durability, HEAD_BEHIND retried until the notice arrives, no retry of a
// refusal the caller must fix, and paging over several pages.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Code,
  ConnectError,
  Durability,
  Kind,
  Reason,
  durabilityName,
  isRetryable,
  reason,
  retryAfterMs,
  summarize,
  type RetryInfo,
} from "../src/index.js";
import { client, eventually, unique } from "./env.js";

test("a mark's round trip answers its durability", async () => {
  const c = client();
  const user = unique("alice");
  const ch = unique("general");
  await c.notifyMessage({ channelId: ch, seq: 5n, messageId: "m5", senderId: unique("bob") });

  const res = await c.markRead({ userId: user, channelId: ch, seq: 3n, messageId: "m3" });
  const r = res.result!;
  assert.equal(r.durability, Durability.KAFKA, `durability ${durabilityName(r.durability)}`);
  assert.equal(r.advanced, true);
  assert.equal(r.realtimeDegraded, false);
  assert.equal(r.state?.read?.position?.seq, 3n);
  assert.deepEqual(summarize([r]), { kafka: 1, spooled: 0, degraded: 0, advanced: 1, refused: [] });

  const again = await c.markReceipts({ receipts: [{ userId: user, channelId: ch, kind: Kind.READ, seq: 2n }] });
  assert.equal(again.results[0].advanced, false, "an older seq is a no-op");
  assert.equal(again.results[0].durability, Durability.KAFKA);

  const state = await c.getReadState({ userId: user, channelId: [ch] });
  assert.equal(state.channels.length, 1);
  assert.equal(state.channels[0].read?.position?.seq, 3n);
  assert.equal(state.channels[0].read?.messageId, "m3");
  const unread = await c.getUnread({ userId: user, channelId: [ch] });
  assert.equal(unread.channels[0].unreadCount, 2n);
});

test("HEAD_BEHIND is retried after its Retry-After until the notice arrives", async () => {
  const ch = unique("race");
  const user = unique("carol");
  const retries: RetryInfo[] = [];
  const c = client({ retry: { onRetry: (r) => retries.push(r) } });
  await c.notifyMessage({ channelId: ch, seq: 1n, messageId: "m1" });

  // The refusal itself, unretried: what the helpers read from it.
  const refusal = await c.raw.markRead({ userId: user, channelId: ch, seq: 3n }).then(
    () => assert.fail("a mark beyond the head was taken"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(refusal.code, Code.Aborted);
  assert.equal(reason(refusal), Reason.HeadBehind);
  assert.equal(isRetryable(refusal), true);
  assert.equal(retryAfterMs(refusal), 1000);

  // The notice of message 3 lands while the retrying call waits.
  const started = Date.now();
  const marked = c.markRead({ userId: user, channelId: ch, seq: 3n }, { timeoutMs: 15_000 });
  setTimeout(() => void c.notifyMessage({ channelId: ch, seq: 3n, messageId: "m3" }), 300);
  const res = await marked;
  assert.equal(res.result?.advanced, true);
  assert.equal(res.result?.state?.read?.position?.seq, 3n);
  assert.ok(retries.length >= 1, "retried");
  for (const r of retries) {
    assert.equal(r.method, "MarkRead");
    assert.equal(reason(r.error), Reason.HeadBehind);
    assert.ok(r.waitMs >= 1000, `waited ${r.waitMs} ms, less than the Retry-After`);
  }
  assert.ok(Date.now() - started >= 1000, "the retry came after the Retry-After");
});

test("a refusal the caller must fix is not retried", async () => {
  const retries: RetryInfo[] = [];
  const c = client({ retry: { onRetry: (r) => retries.push(r) } });

  const invalid = await c.markRead({ userId: "bad user", channelId: unique("ch"), seq: 1n }).then(
    () => assert.fail("an invalid user id was taken"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(invalid.code, Code.InvalidArgument);
  assert.equal(reason(invalid), Reason.InvalidId);
  assert.equal(isRetryable(invalid), false);

  // A non-member of a channel with registered members: PermissionDenied.
  const ch = unique("private");
  await c.joinChannel({ channelId: ch, userId: unique("member") });
  await c.notifyMessage({ channelId: ch, seq: 1n });
  const denied = await c.markRead({ userId: unique("outsider"), channelId: ch, seq: 1n }).then(
    () => assert.fail("a non-member's mark was taken"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(denied.code, Code.PermissionDenied);
  assert.equal(reason(denied), Reason.NotAMember);

  // No token: Unauthenticated, not retried either.
  const anonymous = await client({ token: "" }).getSettings({ userId: unique("x") }).then(
    () => assert.fail("a call without a token was answered"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(anonymous.code, Code.Unauthenticated);
  assert.deepEqual(retries, []);
});

test("paging walks every page of members, read state and unread counts", async () => {
  const c = client();
  const user = unique("dave");
  const channels = Array.from({ length: 7 }, (_, i) => `${unique("page")}-${i}`).sort();
  for (const ch of channels) {
    await c.joinChannel({ channelId: ch, userId: user });
    await c.notifyMessage({ channelId: ch, seq: 4n });
    await c.markRead({ userId: user, channelId: ch, seq: 1n });
  }

  const pages = [];
  for await (const page of c.readStatePages(user, { pageSize: 3 })) {
    pages.push(page.channels.map((s) => s.channelId));
  }
  assert.deepEqual(pages.map((p) => p.length), [3, 3, 1]);
  assert.deepEqual(pages.flat(), channels, "every channel once, in channel id order");

  const unread = [];
  let total = 0n;
  for await (const page of c.unreadPages(user, { pageSize: 3 })) {
    total += page.unreadTotal;
    unread.push(...page.channels);
  }
  assert.deepEqual(unread.map((u) => u.channelId), channels);
  assert.equal(total, 21n, "badge totals summed over the pages: 7 channels × 3 unread");
  const items = [];
  for await (const u of c.unreadChannels(user, { pageSize: 2 })) {
    items.push(u.channelId);
  }
  assert.deepEqual(items, channels);

  const ch = channels[0];
  const members = [user];
  for (let i = 0; i < 4; i++) {
    members.push(unique(`m${i}`));
    await c.joinChannel({ channelId: ch, userId: members[members.length - 1] });
  }
  const got = [];
  for await (const m of c.channelMembers(ch, { pageSize: 2 })) {
    got.push(m);
  }
  assert.deepEqual(got.sort(), members.sort());
  const sizes = [];
  for await (const page of c.channelPages(ch, { pageSize: 2 })) {
    assert.equal(page.memberCount, 5n);
    sizes.push(page.members.length);
  }
  assert.deepEqual(sizes, [2, 2, 1]);

  // Breaking out fetches nothing more: the first item of the first page.
  for await (const first of c.readStateChannels(user, { pageSize: 3 })) {
    assert.equal(first.channelId, channels[0]);
    break;
  }
});

test("retries stop at the caller's timeout and abort, with the last refusal", async () => {
  const retries: RetryInfo[] = [];
  // A minute's backoff: only an abort can end such a wait within the test's time.
  const c = client({ retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, jitter: 0, onRetry: (r) => retries.push(r) } });
  const ch = unique("late");
  const user = unique("gina");
  await c.notifyMessage({ channelId: ch, seq: 1n });
  const refused = (p: Promise<unknown>) =>
    p.then(
      () => assert.fail("a mark beyond the head was taken"),
      (e: unknown) => ConnectError.from(e),
    );

  // The wait would outlast a 5 s timeout: it is not begun.
  let err = await refused(c.markRead({ userId: user, channelId: ch, seq: 5n }, { timeoutMs: 5000 }));
  assert.equal(reason(err), Reason.HeadBehind);
  assert.equal(retries.length, 0);

  // An abort during the wait ends it at once.
  const abort = new AbortController();
  const call = refused(c.markRead({ userId: user, channelId: ch, seq: 5n }, { signal: abort.signal }));
  await eventually("the first wait", () => retries.length > 0);
  abort.abort();
  err = await call;
  assert.equal(reason(err), Reason.HeadBehind);
  assert.equal(retries.length, 1);
  assert.equal(retries[0].waitMs, 60_000);
});
