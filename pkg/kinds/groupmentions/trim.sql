-- Deletes the group mentions of the channels $1 that are no longer among
-- their channel's newest $2+1 (the retention).
DELETE FROM channel_group_mentions m USING unnest($1::text[]) AS k(c)
WHERE m.channel_id = k.c
  AND m.seq < (SELECT x.seq FROM channel_group_mentions x WHERE x.channel_id = k.c
               ORDER BY x.seq DESC OFFSET $2 LIMIT 1)
