-- sandgate schema 1: sandbox records with their budget, nodes, tokens.
--
-- Keys that come from callers (ids, nodes, principals, token ids,
-- idempotency keys) are bytea: a PostgreSQL text value cannot hold the
-- NUL byte a key may carry, and bytea compares bytewise, so no collation
-- can reorder them. Records are stored as the JSON the bbolt store keeps
-- (bytea, not jsonb: jsonb refuses \u0000 and reorders members).
--
-- Positions are orderkey encodings (12 bytes of instant, then the id):
--   pos    CreatedAt, id                      listing order (ListPage, List)
--   due    min(ExpiresAt, CeilingAt), id      live records only (Due)
--   ended  EndedAt (UpdatedAt if zero), id    terminal records only (Prune)

CREATE TABLE sandboxes (
	id        bytea    PRIMARY KEY,
	node      bytea    NOT NULL,
	principal bytea    NOT NULL,
	state     smallint NOT NULL CHECK (state BETWEEN 1 AND 4), -- 1 starting, 2 running, 3 failed, 4 ended
	pos       bytea    NOT NULL, -- unique as it ends in the id; no index of its own, so
	                                -- the planner walks a state's range, never all of them
	due       bytea    CHECK ((due IS NOT NULL) = (state <= 2)),
	ended     bytea    CHECK ((ended IS NOT NULL) = (state >= 3)),
	idem      bytea,
	token_jti bytea    UNIQUE,   -- the session token's id and digest: one
	token_dig bytea    UNIQUE,   -- session token belongs to one sandbox
	cpu_mhz   bigint   NOT NULL CHECK (cpu_mhz >= 0),
	memory_mb bigint   NOT NULL CHECK (memory_mb >= 0),
	record    bytea    NOT NULL,
	spec      bytea
);
CREATE INDEX sandboxes_by_state     ON sandboxes (state, pos);
CREATE INDEX sandboxes_by_principal ON sandboxes (principal, state, pos);
CREATE INDEX sandboxes_by_node      ON sandboxes (node, state, pos);
CREATE INDEX sandboxes_by_due       ON sandboxes (due) WHERE due IS NOT NULL;
CREATE INDEX sandboxes_by_ended     ON sandboxes (ended) WHERE ended IS NOT NULL;
CREATE INDEX sandboxes_by_idem      ON sandboxes (idem, pos) WHERE idem IS NOT NULL;

-- One row per idempotency key ever used: Reserve locks it, so racing
-- repeats of one key, on any gateway, are decided one after the other.
CREATE TABLE idempotency_keys (
	key bytea PRIMARY KEY
);

-- Live use per node and per principal, moved in the transaction that
-- moves a record; Reserve locks the two rows it reads.
CREATE TABLE node_usage (
	node      bytea  PRIMARY KEY,
	sandboxes bigint NOT NULL DEFAULT 0 CHECK (sandboxes >= 0),
	cpu_mhz   bigint NOT NULL DEFAULT 0 CHECK (cpu_mhz >= 0),
	memory_mb bigint NOT NULL DEFAULT 0 CHECK (memory_mb >= 0)
);
CREATE TABLE principal_usage (
	principal bytea  PRIMARY KEY,
	sandboxes bigint NOT NULL DEFAULT 0 CHECK (sandboxes >= 0),
	cpu_mhz   bigint NOT NULL DEFAULT 0 CHECK (cpu_mhz >= 0),
	memory_mb bigint NOT NULL DEFAULT 0 CHECK (memory_mb >= 0)
);

-- Records per state, in shards (by the id's hash) so that creates on
-- different gateways rarely wait on one counter row.
CREATE TABLE state_counts (
	state smallint NOT NULL,
	shard smallint NOT NULL,
	n     bigint   NOT NULL CHECK (n >= 0),
	PRIMARY KEY (state, shard)
);

CREATE TABLE nodes (
	name   bytea PRIMARY KEY,
	record bytea NOT NULL
);

CREATE TABLE tokens (
	jti    bytea PRIMARY KEY,
	pos    bytea NOT NULL UNIQUE, -- CreatedAt, jti
	record bytea NOT NULL
);

-- cursor_key signs ListPage cursors, so a cursor from another database
-- is refused.
CREATE TABLE meta (
	key   text  PRIMARY KEY,
	value bytea NOT NULL
);
