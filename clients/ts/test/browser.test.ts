// The client in a real browser: Debian's headless Chromium loads a page
// from another origin than the gateway (so CORS is exercised: the gateway
// allows that origin) with its user's end-user token (a JWT, as an app's
// sign-in gives it: the server token never reaches a page); the page
// watches a channel of its user through the web client, its own read
// shows up on it as a tick, and another user's inbox and a notice are
// refused with their reasons.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import http from "node:http";
import { test } from "node:test";

import { chromium } from "playwright-core";

import { api, client, endUserToken, unique } from "./env.js";

const files: Record<string, { path: URL; type: string }> = {
  "/": { path: new URL("../../test/browser/index.html", import.meta.url), type: "text/html; charset=utf-8" },
  "/page.js": { path: new URL("../browser/page.js", import.meta.url), type: "text/javascript; charset=utf-8" },
};

test("a page on another origin shows a read tick arriving over a watch", async (t) => {
  const port = Number(process.env.PAGE_PORT);
  assert.ok(port > 0, "PAGE_PORT is set (the origin the gateway allows)");
  const server = http.createServer(async (req, res) => {
    const f = files[new URL(req.url ?? "/", "http://x").pathname];
    if (!f) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": f.type }).end(await readFile(f.path));
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  // The chat backend, with its server token: the channel and its message.
  const c = client();
  const ch = unique("web");
  const reader = unique("erin");
  await c.joinChannel({ channelId: ch, userId: reader });
  await c.notifyMessage({ channelId: ch, seq: 2n, senderId: unique("frank") });

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    // Root in a container has no user namespaces for Chromium's sandbox.
    args: ["--no-sandbox"],
  });
  t.after(() => browser.close());
  const page = await browser.newPage();
  const logs: string[] = [];
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));

  const q = new URLSearchParams({ api, token: endUserToken(reader), user: reader, channel: ch, mark: "2", other: unique("grace") });
  const origin = `http://127.0.0.1:${port}`;
  assert.notEqual(new URL(api).origin, origin, "the page is cross-origin to the gateway");
  await page.goto(`${origin}/?${q}`);
  try {
    await page.waitForSelector("body[data-watching='1']", { timeout: 15_000 });
    const tick = await page.waitForSelector(`#ticks li[data-user='${reader}'][data-seq='2']`, { timeout: 15_000 });
    assert.match((await tick.textContent()) ?? "", /✓✓ .* read up to 2/);
    await page.waitForSelector("body[data-marked='1']", { timeout: 15_000 });
    const body = page.locator("body");
    assert.equal(await body.getAttribute("data-foreign"), "NOT_YOUR_USER", "another user's inbox");
    assert.equal(await body.getAttribute("data-notice"), "SCOPE_MISSING", "a notice is the server's");
    assert.equal(await body.getAttribute("data-error"), null);
  } catch (e) {
    const body = await page.locator("body").innerText().catch(() => "");
    throw new Error(`${String(e)}\npage: ${body}\nconsole:\n${logs.join("\n")}`);
  }
});
