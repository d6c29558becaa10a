package retries_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/retries"
)

// TestEveryMethodHasAPolicy holds the table to the service: every method
// is listed, none that is gone.
func TestEveryMethodHasAPolicy(t *testing.T) {
	t.Parallel()
	svc := receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService")
	ms := svc.Methods()
	table := retries.Methods()
	for i := range ms.Len() {
		name := string(ms.Get(i).Name())
		_, ok := table[name]
		require.True(t, ok, "%s has no policy in retries.json", name)
		delete(table, name)
	}
	require.Empty(t, table, "retries.json names methods the service does not have")
}

// TestPolicies: what may and may not be repeated blindly.
func TestPolicies(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"MarkReceipts", "MarkRead", "ReadAll", "NotifyMessage", "DeleteMessage", "GetInbox", "MarkThreadRead", "WatchChannels", "SetFullyRead"} {
		require.Equal(t, retries.Blind, retries.Of(m), m)
	}
	for _, m := range []string{"MarkUnread", "MarkThreadUnread", "FollowThread", "UnfollowThread", "JoinChannel", "LeaveChannel", "UpdateSettings", "SetNotifications", "EraseUser"} {
		require.Equal(t, retries.Once, retries.Of(m), m)
	}
	require.Equal(t, retries.Blind, retries.Of("/receipts.v1.ReceiptService/MarkRead"), "by procedure too")
	require.Equal(t, retries.Once, retries.Of("NewCall"), "unknown: not repeated blindly")
}
