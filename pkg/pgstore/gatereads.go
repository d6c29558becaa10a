package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/receipt"
)

// ReadEpochs returns the current read epoch (the greater of the public
// and the private read cursor's) of each listed key that has a row: what
// a mark without an epoch applies at when Redis cannot resolve it.
func (s *Store) ReadEpochs(ctx context.Context, keys []receipt.Key) (map[receipt.Key]int64, error) {
	users, chans := keyArrays(len(keys), func(i int) receipt.Key { return keys[i] })
	rows, err := s.pool.Query(ctx, `SELECT t.user_id, t.channel_id, GREATEST(t.read_epoch, t.private_read_epoch)
		FROM read_receipts t `+joinKeysSQL, users, chans)
	if err != nil {
		return nil, classify(err)
	}
	out := make(map[receipt.Key]int64, len(keys))
	var k receipt.Key
	var e int64
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel, &e}, func() error {
		out[k] = e
		return nil
	})
	return out, classify(err)
}
