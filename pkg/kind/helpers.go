package kind

import (
	"slices"

	"github.com/readstate/receipts/pkg/receipt"
)

// ValidIDs dedupes one SCAN page of ids (SCAN may return one more than
// once), counts them in scanned, and keeps the valid ones, counting the
// others in invalid.
func ValidIDs(field string, ids []string, scanned, invalid *int) []string {
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

// ByUser groups keys by user, in first-seen order.
func ByUser(keys []receipt.Key) (users []string, channels map[string][]string) {
	channels = map[string][]string{}
	for _, k := range keys {
		if _, ok := channels[k.User]; !ok {
			users = append(users, k.User)
		}
		channels[k.User] = append(channels[k.User], k.Channel)
	}
	return users, channels
}

// PGGetChunk bounds the channels of one per-user Postgres lookup.
const PGGetChunk = 1000

// ResultErrs turns a Redis call's per-value results into per-value errors.
func ResultErrs[R any](res []R, err error, errOf func(R) error) ([]error, error) {
	if res == nil {
		return nil, err
	}
	errs := make([]error, len(res))
	for i, r := range res {
		errs[i] = errOf(r)
	}
	return errs, err
}
