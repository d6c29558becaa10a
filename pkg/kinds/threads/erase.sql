-- An erasure's delete of the user's registers ($1 the user), run in the
-- transaction that raises the tombstone (pgstore.Store.Erase).
DELETE FROM thread_states WHERE user_id = $1
