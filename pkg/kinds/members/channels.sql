-- The channels the user has a membership register in ($1 the user): read
-- by an erasure before any delete, for the redactions and the move log's
-- delete.
SELECT channel_id FROM channel_members WHERE user_id = $1
