-- Settings every service of a deployment must agree on, stored once: the
-- first service to start stores its value, every other one checks its own
-- against it at start-up and refuses to run on a disagreement
-- (pgstore.AgreeSetting). Changing one is an operator's UPDATE, with the
-- services' flags changed to match.
CREATE TABLE deployment_settings (
    name  text   NOT NULL PRIMARY KEY,
    value bigint NOT NULL
);
