// The browser test's page: watches one channel through the TypeScript
// client (connect-web) and shows a read tick per READ update. Its query
// says where: ?api=<gateway URL>&token=<bearer token>&channel=<id>.
import { Kind, createWebClient } from "../../src/web.js";

const params = new URLSearchParams(location.search);
const client = createWebClient(params.get("api") ?? "", { token: params.get("token") ?? undefined });
const status = document.getElementById("status")!;
const ticks = document.getElementById("ticks")!;

async function main(): Promise<void> {
  for await (const ev of client.watch([params.get("channel") ?? ""])) {
    if (ev.snapshot.length > 0) {
      status.textContent = "watching";
      document.body.dataset.watching = "1";
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
