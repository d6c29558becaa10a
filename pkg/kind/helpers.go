package kind

import (
	"context"
	"slices"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
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

// ScanUsers is one SCAN page of a kind that keeps a hash per user: the
// users scan names (deduped, valid ones only: ValidIDs), each handed to
// read, which adds the user's values to the page (and counts what it
// refuses in page.Invalid).
func ScanUsers[V any](ctx context.Context, cur redisstore.ScanCursor, count int64,
	scan func(context.Context, redisstore.ScanCursor, int64) ([]string, redisstore.ScanCursor, error),
	read func(ctx context.Context, user string, page *ScanPage[V]) error) (ScanPage[V], error) {
	users, next, err := scan(ctx, cur, count)
	if err != nil {
		return ScanPage[V]{}, err
	}
	page := ScanPage[V]{Next: next}
	for _, u := range ValidIDs("user_id", users, &page.Scanned, &page.Invalid) {
		if err := read(ctx, u, &page); err != nil {
			return page, err
		}
	}
	return page, nil
}
