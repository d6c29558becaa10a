-- The channels the user has cursors in ($1 the user): read by an erasure
-- before any delete, for the redactions and the move log's delete.
SELECT channel_id FROM read_receipts WHERE user_id = $1
