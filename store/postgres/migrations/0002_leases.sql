-- Leases elect the one replica that does a kind of work (the background
-- loops). expires_at is set from the server's clock, the one clock every
-- replica shares; epoch grows whenever the lease changes hands, and every
-- write made under a lease checks it (store.WithFence).
CREATE TABLE leases (
	name        text        PRIMARY KEY,
	holder      text        NOT NULL,
	epoch       bigint      NOT NULL CHECK (epoch >= 1),
	expires_at  timestamptz NOT NULL,
	acquired_at timestamptz NOT NULL
);
