-- Erasure tombstones: one row per erased user, a max-register
-- over generation. Never deleted: a replay of the topic from offset 0
-- meets the tombstone and drops every event that predates it
-- (tombstone.Drops). Small (one row per erased user) and read by primary
-- key only, once per persister window for the window's users.
CREATE TABLE user_tombstones (
    user_id           text   NOT NULL PRIMARY KEY,
    generation        bigint NOT NULL,
    erased_at_unix_ms bigint NOT NULL,
    CONSTRAINT user_tombstones_bounded CHECK (
        octet_length(user_id) BETWEEN 1 AND 128 AND generation > 0 AND erased_at_unix_ms >= 0)
);
