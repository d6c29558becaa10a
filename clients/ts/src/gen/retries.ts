// Generated from api/retries/retries.json by clients/ts/scripts/retries.mjs
// (make generate). Do not edit.

/** When a failed call is retried (RetryPolicy): "blind" or "once". */
export type CallRetry = "blind" | "once";

/**
 * Which calls of receipts.v1.ReceiptService a client may retry blindly:
 * the one table the Go client (pkg/client, through package api/retries)
 * and the TypeScript client (clients/ts/src/gen/retries.ts, written from
 * it by make generate) both follow. Every method is listed, in the proto's
 * order; a new one must be added here (the tests of both clients fail
 * otherwise).
 *
 * blind: retried on every refusal that says later (UNAVAILABLE;
 * RATE_LIMITED; HEAD_BEHIND): a repeat leaves the same state as one call
 * (a mark is a max-register, a notice raises the head and adds to mention
 * sets, a deletion adds to a grow-only set, a read changes nothing)
 *
 * once: retried only when the request never left or the gateway refused it
 * before writing anything (HEAD_BEHIND, RATE_LIMITED): each attempt takes
 * a new version (the head and the clock at the time, the epoch after the
 * stored one, the next erasure generation), so repeating one that was
 * applied but whose answer was lost could undo a change made in between
 */
export const callRetry: Readonly<Record<string, CallRetry>> = {
  MarkReceipts: "blind",
  MarkRead: "blind",
  MarkDelivered: "blind",
  GetReadState: "blind",
  NotifyMessage: "blind",
  NotifyMessages: "blind",
  DeleteMessage: "blind",
  DeleteThreadReply: "blind",
  JoinChannel: "once",
  LeaveChannel: "once",
  GetChannel: "blind",
  GetUnread: "blind",
  MarkUnread: "once",
  ReadAll: "blind",
  GetMessageReceipts: "blind",
  GetTicks: "blind",
  LookupReceipts: "blind",
  WatchChannels: "blind",
  UpdateSettings: "once",
  GetSettings: "blind",
  EraseUser: "once",
  NotifyThreadReply: "blind",
  MarkThreadRead: "blind",
  MarkThreadUnread: "once",
  FollowThread: "once",
  UnfollowThread: "once",
  ListThreads: "blind",
  GetThreadMessageReceipts: "blind",
  GetThreadTicks: "blind",
  SetNotifications: "once",
  SetFullyRead: "blind",
  GetInbox: "blind",
};
