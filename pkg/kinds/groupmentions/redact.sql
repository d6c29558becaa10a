-- An erasure's redaction of the user as a sender ($1 the user, $2 the
-- user's channels), run in the transaction that raises the tombstone
-- (pgstore.Store.Erase): the mention stays with no sender, the least,
-- which every store converges to.
UPDATE channel_group_mentions SET sender_id = '' WHERE channel_id = ANY($2) AND sender_id = $1
