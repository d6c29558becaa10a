// A watch across a forced disconnect: the stream's connection is reset
// and refused for a while, marks land meanwhile, and the watch resumes
// from its last token with every update once.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError, Kind, Reason, reason, type RetryInfo, type WatchEvent } from "../src/index.js";
import { api, client, eventually, unique } from "./env.js";
import { Proxy } from "./proxy.js";

test("watch resumes across a forced disconnect with no update missed or repeated", async (t) => {
  const direct = client();
  const ch = unique("live");
  const alice = unique("alice");
  const bob = unique("bob");
  // Only channels with registered members have a view to watch.
  for (const u of [alice, bob]) {
    await direct.joinChannel({ channelId: ch, userId: u });
  }
  await direct.notifyMessage({ channelId: ch, seq: 10n, senderId: unique("carol") });

  const url = new URL(api);
  const proxy = new Proxy({ host: url.hostname, port: Number(url.port) });
  await proxy.listen();
  const reconnects: RetryInfo[] = [];
  const watcher = client({ retry: { maxAttempts: 1000, baseDelayMs: 50, maxDelayMs: 500, onRetry: (r) => reconnects.push(r) } }, proxy.url);

  const events: WatchEvent[] = [];
  let failure: unknown;
  let ended = false;
  const abort = new AbortController();
  // A failed assertion must not leave the watch (and the test process) running.
  t.after(async () => {
    abort.abort();
    await proxy.cut();
  });
  const loop = (async () => {
    try {
      for await (const ev of watcher.watch([ch], { signal: abort.signal })) {
        events.push(ev);
      }
    } catch (e) {
      failure = e;
    } finally {
      ended = true;
    }
  })();
  const reads = (user: string) =>
    events.flatMap((ev) => ev.updates.filter((u) => u.userId === user && u.kind === Kind.READ).map((u) => u.position?.seq));
  const await_ = async (user: string, ...want: bigint[]) => {
    await eventually(`reads ${want} of ${user}`, () => failure !== undefined || reads(user).length >= want.length);
    assert.equal(failure, undefined);
    assert.deepEqual(reads(user), want);
  };

  await eventually("the fresh stream's snapshot", () => events.length > 0);
  assert.ok(events[0].snapshot.length > 0, "a fresh stream opens with a snapshot");

  await direct.markRead({ userId: alice, channelId: ch, seq: 1n });
  await await_(alice, 1n);

  await proxy.cut();
  // While the watcher cannot connect: one mark of each user.
  await direct.markRead({ userId: alice, channelId: ch, seq: 2n });
  await direct.markRead({ userId: bob, channelId: ch, seq: 5n });
  await eventually("reconnect attempts while cut", () => reconnects.length >= 2 || failure !== undefined);
  assert.equal(failure, undefined);
  await proxy.listen();

  await await_(alice, 1n, 2n);
  await await_(bob, 5n);
  assert.ok(reconnects.every((r) => r.method === "WatchChannels"));

  await direct.markRead({ userId: alice, channelId: ch, seq: 3n });
  await await_(alice, 1n, 2n, 3n);
  assert.deepEqual(reads(bob), [5n], "nothing repeated after the resume");

  abort.abort();
  await eventually("the watch to end on abort", () => ended);
  await loop;
  assert.equal(failure, undefined, "aborting ends the watch without an error");
});

test("a watch refused for good throws once, unretried", async () => {
  const retries: RetryInfo[] = [];
  const c = client({ retry: { onRetry: (r) => retries.push(r) } });
  const events: WatchEvent[] = [];
  const err = await (async () => {
    for await (const ev of c.watch(["bad{channel"])) {
      events.push(ev);
    }
  })().then(
    () => assert.fail("the watch of an invalid channel id ended without an error"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(err.code, Code.InvalidArgument);
  assert.equal(reason(err), Reason.InvalidId);
  assert.deepEqual(events, []);
  assert.deepEqual(retries, []);
});
