// End-user tokens against the real gateway: what a browser or app holds
// for its signed-in user. It acts on its own user and watches or reads
// receipts only of its user's channels; the rest is refused with a
// reason, and an expired token is CREDENTIALS_EXPIRED. A token function
// is asked before every attempt, so a refreshed token is picked up.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError, Reason, errorInfo, reason } from "../src/index.js";
import { client, endUserToken, unique } from "./env.js";

async function refusal(p: Promise<unknown>): Promise<ConnectError> {
  return p.then(
    () => assert.fail("answered"),
    (e: unknown) => ConnectError.from(e),
  );
}

test("an end-user token acts on its own user and its user's channels only", async () => {
  const server = client();
  const alice = unique("alice");
  const bob = unique("bob");
  const ours = unique("ours");
  const bobs = unique("bobs");
  await server.joinChannel({ channelId: ours, userId: alice });
  await server.joinChannel({ channelId: ours, userId: bob });
  await server.joinChannel({ channelId: bobs, userId: bob });
  await server.notifyMessage({ channelId: ours, seq: 4n, senderId: bob });
  await server.notifyMessage({ channelId: bobs, seq: 2n, senderId: bob });

  const app = client({ token: endUserToken(alice) });
  const mark = await app.markRead({ userId: alice, channelId: ours, seq: 3n });
  assert.equal(mark.result?.advanced, true);
  const unread = await app.getUnread({ userId: alice, channelId: [ours] });
  assert.equal(unread.channels[0].unreadCount, 1n);
  await app.getInbox({ userId: alice });
  const ticks = await app.getTicks({ channelId: ours });
  assert.equal(ticks.head?.seq, 4n);

  const foreign = await refusal(app.getInbox({ userId: bob }));
  assert.equal(foreign.code, Code.PermissionDenied);
  assert.equal(reason(foreign), Reason.NotYourUser);
  assert.equal(errorInfo(foreign)?.metadata.field, "user_id");
  assert.equal(reason(await refusal(app.markRead({ userId: bob, channelId: ours, seq: 4n }))), Reason.NotYourUser);
  const notice = await refusal(app.notifyMessage({ channelId: ours, seq: 5n, senderId: alice }));
  assert.equal(reason(notice), Reason.ScopeMissing);
  assert.equal(errorInfo(notice)?.metadata.scope, "notify");
  assert.equal(reason(await refusal(app.joinChannel({ channelId: bobs, userId: alice }))), Reason.ScopeMissing);
  assert.equal(reason(await refusal(app.getTicks({ channelId: bobs }))), Reason.NotAMember);
});

test("an expired end-user token is refused until the token function gives a fresh one", async () => {
  const user = unique("carol");
  const expired = await refusal(client({ token: endUserToken(user, -3600) }).getSettings({ userId: user }));
  assert.equal(expired.code, Code.Unauthenticated);
  assert.equal(reason(expired), Reason.CredentialsExpired);

  let asked = 0;
  const app = client({ token: () => (++asked > 1 ? endUserToken(user) : endUserToken(user, -3600)) });
  assert.equal(reason(await refusal(app.getSettings({ userId: user }))), Reason.CredentialsExpired, "not retried: the app refreshes");
  const settings = await app.getSettings({ userId: user });
  assert.equal(settings.userId, user);
  assert.equal(asked, 2);
});
