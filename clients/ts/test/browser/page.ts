// The browser test's page: as an app would, it holds the signed-in
// user's end-user token (a JWT, never the server token), watches one of
// the user's channels through the TypeScript client (connect-web), shows
// a read tick per READ update, marks its own read, and tries what the
// token may not do (another user's inbox, a notice), showing the reasons.
// Its query says where: ?api=<gateway URL>&token=<end-user token>&user=<its
// user>&channel=<id>&mark=<seq>&other=<another user>.
import { Kind, createWebClient, reason } from "../../src/web.js";

const params = new URLSearchParams(location.search);
const q = (name: string) => params.get(name) ?? "";
// The function form: an app would return its current (refreshed) token.
const client = createWebClient(q("api"), { token: () => q("token") });
const status = document.getElementById("status")!;
const ticks = document.getElementById("ticks")!;

/** What the token may and may not do, once the watch is open. */
async function act(): Promise<void> {
  const refused = (p: Promise<unknown>) => p.then(() => "answered", (e: unknown) => reason(e) || String(e));
  document.body.dataset.foreign = await refused(client.getInbox({ userId: q("other") }));
  document.body.dataset.notice = await refused(client.notifyMessage({ channelId: q("channel"), seq: 99n, senderId: q("user") }));
  await client.markRead({ userId: q("user"), channelId: q("channel"), seq: BigInt(q("mark")) });
  document.body.dataset.marked = "1";
}

async function main(): Promise<void> {
  for await (const ev of client.watch([q("channel")])) {
    if (ev.snapshot.length > 0 && document.body.dataset.watching !== "1") {
      status.textContent = "watching";
      document.body.dataset.watching = "1";
      act().catch((e: unknown) => {
        document.body.dataset.error = String(e);
      });
    }
    for (const u of ev.updates) {
      if (u.kind !== Kind.READ || !u.position) {
        continue;
      }
      const li = document.createElement("li");
      li.dataset.user = u.userId;
      li.dataset.seq = String(u.position.seq);
      li.textContent = `✓✓ ${u.userId} read up to ${u.position.seq}`;
      ticks.append(li);
    }
  }
}

main().catch((e: unknown) => {
  status.textContent = `error: ${String(e)}`;
  document.body.dataset.error = String(e);
});
