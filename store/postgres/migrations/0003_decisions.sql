-- The decision logs of every replica in one table, so GET /v1/decisions,
-- replay and the dashboard answer for the whole deployment. Each row is
-- the line a gateway wrote (line, JSON as bytea, like the records) and
-- the fields a query selects on. t is the decision's time in Unix
-- nanoseconds: the order (t, id) is exact, so a cursor never skips or
-- repeats a decision. Rows past the retention are pruned by the replica
-- that holds the background lease.
CREATE TABLE decisions (
	t          bigint   NOT NULL,
	id         bytea    NOT NULL,
	allow      boolean  NOT NULL,
	principal  bytea    NOT NULL,
	entrypoint bytea    NOT NULL,
	rules      bytea[]  NOT NULL,
	line       bytea    NOT NULL,
	PRIMARY KEY (t, id)
);
-- One decision id is stored once, whichever replica's retry brings it.
CREATE UNIQUE INDEX decisions_by_id        ON decisions (id);
CREATE INDEX        decisions_by_principal ON decisions (principal, t, id);
CREATE INDEX        decisions_denied       ON decisions (t, id) WHERE NOT allow;
CREATE INDEX        decisions_by_rule      ON decisions USING gin (rules);
