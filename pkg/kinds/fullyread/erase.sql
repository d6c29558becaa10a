-- An erasure's delete of the user's markers ($1 the user), run in the
-- transaction that raises the tombstone (pgstore.Store.Erase).
DELETE FROM fully_read WHERE user_id = $1
