-- Group mentions (channel.GroupMentions): messages that mention every
-- member of a channel but their sender, stored once per channel (not per
-- member), the newest mention cap + 1 kept per channel. Two notices of
-- one seq that disagree on the sender keep the least (bytes: COLLATE "C").
CREATE TABLE channel_group_mentions (
    channel_id text   NOT NULL,
    seq        bigint NOT NULL,
    sender_id  text   COLLATE "C" NOT NULL,
    PRIMARY KEY (channel_id, seq),
    CONSTRAINT channel_group_mentions_bounded CHECK (
        octet_length(channel_id) BETWEEN 1 AND 128 AND octet_length(sender_id) <= 128 AND seq > 0)
);
