-- An erasure's delete of the user's cursors ($1 the user), run in the
-- transaction that raises the tombstone (pgstore.Store.Erase), after it
-- read the user's channels (channels.sql).
DELETE FROM read_receipts WHERE user_id = $1
