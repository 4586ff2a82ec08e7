package bolt

import (
	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// LoadForBenchmark stores n records made by gen, in any state, batch to a
// transaction, through the writes Reserve and Update make (record, spec,
// index entries, counts, use), without validation or admit. It lets a
// benchmark build a long history in seconds rather than n fsyncs.
func (s *Store) LoadForBenchmark(n, batch int, gen func(i int) store.Sandbox) error {
	for start := 0; start < n; start += batch {
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				rec := gen(i)
				if err := putRecord(tx, rec); err != nil {
					return err
				}
				if err := putSpec(tx, rec.ID, rec.Spec); err != nil {
					return err
				}
				if err := insertDerived(tx, rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
