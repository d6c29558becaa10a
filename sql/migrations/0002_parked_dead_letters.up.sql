-- Dead letters the reconciler could not repair after its bounded retries,
-- kept for an operator to list and replay (receiptsctl dlt list / replay).
CREATE TABLE parked_dead_letters (
    id               bigserial   PRIMARY KEY,
    parked_at        timestamptz NOT NULL DEFAULT now(),
    reason           text        NOT NULL,
    source_topic     text        NOT NULL DEFAULT '',
    source_partition integer     NOT NULL DEFAULT -1,
    source_offset    bigint      NOT NULL DEFAULT -1,
    attempts         integer     NOT NULL DEFAULT 0,
    record_key       bytea,
    record_value     bytea,
    replayed_at      timestamptz
);
CREATE INDEX parked_dead_letters_pending ON parked_dead_letters (id) WHERE replayed_at IS NULL;
