// What scripts/clients-test.sh hands the tests: the stack's address and
// token, and a run id that makes every user and channel of this run new.
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
