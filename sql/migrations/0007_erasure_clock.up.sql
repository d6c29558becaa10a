-- The count of erasures applied (one row). pgstore.Erase raises it,
-- holding its row lock until commit, before it deletes a user's rows. A
-- writer that read the count before looking up its users' tombstones, and
-- reads it again FOR SHARE once its rows are committed, either sees it
-- unchanged (an erasure starting later deletes what it wrote) or waits for
-- the erasure in progress and sees it moved: then it looks the tombstones
-- up again and takes back what it wrote for a user erased meanwhile.
CREATE TABLE erasure_clock (
    id       boolean NOT NULL PRIMARY KEY DEFAULT true CHECK (id),
    erasures bigint  NOT NULL
);
INSERT INTO erasure_clock (erasures) VALUES (0);
