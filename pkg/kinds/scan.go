package kinds

import (
	"slices"

	"github.com/readstate/receipts/pkg/receipt"
)

// validIDs dedupes one SCAN page of ids (SCAN may return one more than
// once), counts them in scanned, and keeps the valid ones, counting the
// others in invalid.
func validIDs(field string, ids []string, scanned, invalid *int) []string {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	*scanned += len(ids)
	valid := ids[:0]
	for _, id := range ids {
		if receipt.ValidateID(field, id) != nil {
			*invalid++
			continue
		}
		valid = append(valid, id)
	}
	return valid
}

// byUser groups keys by user, in first-seen order.
func byUser(keys []receipt.Key) (users []string, channels map[string][]string) {
	channels = map[string][]string{}
	for _, k := range keys {
		if _, ok := channels[k.User]; !ok {
			users = append(users, k.User)
		}
		channels[k.User] = append(channels[k.User], k.Channel)
	}
	return users, channels
}

// pgGetChunk bounds the channels of one per-user Postgres lookup.
const pgGetChunk = 1000
