-- An erasure's delete of the user's logged moves ($1 the user, $2 the
-- channels the user's rows named: every move is of a (user, channel) with
-- a cursor row), through the log's index that leads with channel_id.
DELETE FROM cursor_moves WHERE user_id = $1 AND channel_id = ANY($2)
