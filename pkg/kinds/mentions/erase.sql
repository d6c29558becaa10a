-- An erasure's delete of the user's mentions ($1 the user), run in the
-- transaction that raises the tombstone (pgstore.Store.Erase).
DELETE FROM mentions WHERE user_id = $1
