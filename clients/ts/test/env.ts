// What scripts/clients-test.sh hands the tests: the stack's address, its
// server token and the key its end-user tokens are signed with (HS256),
// and a run id that makes every user and channel of this run new.
import { createHmac } from "node:crypto";

import { createNodeClient, type NodeClientOptions, type ReceiptsClient } from "../src/node.js";

function need(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run scripts/clients-test.sh (make test-clients)`);
  }
  return v;
}

export const api = need("RECEIPTS_API");
export const token = need("RECEIPTS_TOKEN");
const run = need("RECEIPTS_RUN");
const jwtKey = need("RECEIPTS_JWT_KEY");
const jwtAudience = need("RECEIPTS_JWT_AUDIENCE");

/**
 * An end-user token for user, as the app's sign-in would issue it: a JWT
 * (HS256 with the gateway's key) whose sub is the user, expiring in
 * expiresIn seconds (negative: already expired).
 */
export function endUserToken(user: string, expiresIn = 600): string {
  const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub: user, aud: jwtAudience, iat: now, exp: now + expiresIn })}`;
  return `${body}.${createHmac("sha256", jwtKey).update(body).digest("base64url")}`;
}

/** A name no earlier run used: ids may not contain ':'. */
export function unique(what: string): string {
  return `${run}-${what}-${Math.random().toString(36).slice(2, 8)}`;
}

export function client(opts: NodeClientOptions = {}, baseUrl = api): ReceiptsClient {
  return createNodeClient(baseUrl, { token, ...opts });
}

/** Polls check every 20 ms until it holds, failing after ms. */
export async function eventually(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
