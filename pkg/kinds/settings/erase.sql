-- An erasure's delete of the user's settings ($1 the user), run in the
-- transaction that raises the tombstone (pgstore.Store.Erase).
DELETE FROM user_settings WHERE user_id = $1
