-- An erasure's delete of the user's registers ($1 the user), run in the
-- transaction that raises the tombstone (pgstore.Store.Erase), after it
-- read the user's channels (which the registers name too).
DELETE FROM channel_members WHERE user_id = $1
