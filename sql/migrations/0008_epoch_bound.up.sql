-- Read epochs are bounded (receipt.MaxEpoch = 2^31 - 1): only mark-unread
-- moves an epoch forward, one step a call, and the bound keeps a
-- client-chosen epoch and the step after it inside every store's numbers.
-- NOT VALID: rows written before the bound are left as they are (they
-- still decode); every new or updated row is held to it.
ALTER TABLE read_receipts
    ADD CONSTRAINT read_receipts_epoch_bound CHECK (
        read_epoch <= 2147483647 AND private_read_epoch <= 2147483647 AND delivered_epoch <= 2147483647) NOT VALID;
ALTER TABLE cursor_moves
    ADD CONSTRAINT cursor_moves_epoch_bound CHECK (epoch <= 2147483647) NOT VALID;
