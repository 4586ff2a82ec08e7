package assemble

import (
	"context"
	"path/filepath"

	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/postgres"
)

// drivers are the store implementations by StoreConfig.Driver. A new
// driver is one entry here, its fields in StoreConfig and its opener
// below; validate names every key of this map as the known drivers.
var drivers = map[string]func(ctx context.Context, dataDir string, c StoreConfig) (store.Store, error){
	DriverBolt:     openBolt,
	DriverPostgres: openPostgres,
}

// OpenStore opens the store c.Store names, and nothing else: Engine and
// the other parts are not needed. `sandgate token mint --offline` records
// a token in it while no gateway runs. An unknown driver is refused; the
// driver's own error (bolt.ErrLocked while a gateway holds the file) is
// returned as it is. The caller closes the store.
func OpenStore(ctx context.Context, c Config) (store.Store, error) {
	c = c.withDefaults()
	if err := c.Store.validate(); err != nil {
		return nil, err
	}
	return drivers[c.Store.Driver](ctx, c.DataDir, c.Store)
}

// openBolt opens the bbolt file at c.Path, by default StoreFile in dataDir.
func openBolt(_ context.Context, dataDir string, c StoreConfig) (store.Store, error) {
	path := c.Path
	if path == "" {
		if dataDir == "" {
			return nil, configErr("store.path", "required without DataDir")
		}
		path = filepath.Join(dataDir, StoreFile)
	}
	st, err := bolt.Open(path, c.Bolt)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// openPostgres connects to c.DSN and brings its schema up to date.
func openPostgres(ctx context.Context, _ string, c StoreConfig) (store.Store, error) {
	if c.DSN == "" {
		return nil, configErr("store.dsn", "required by the postgres driver")
	}
	st, err := postgres.Open(ctx, c.DSN, c.Postgres)
	if err != nil {
		return nil, err
	}
	return st, nil
}
