package orderkey_test

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"sandgate/store/orderkey"
)

// Byte order is time order, then id order, for instants on both sides of
// 1970 (the zero time.Time included) and ids that share prefixes.
func TestByteOrderIsTimeThenIDOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a reproducible test sequence
	times := []time.Time{{}, time.Unix(0, 0), time.Unix(-1, 999999999), time.Unix(1, 0), time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)}
	for range 200 {
		times = append(times, time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(1e9)))
	}
	ids := []string{"", "a", "a\x00", "ab", "b", "\u00ff"}
	for range 2000 {
		t1, t2 := times[rng.IntN(len(times))], times[rng.IntN(len(times))]
		id1, id2 := ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]
		want := t1.Compare(t2)
		if want == 0 {
			want = bytes.Compare([]byte(id1), []byte(id2))
		}
		if got := bytes.Compare(orderkey.At(t1, id1), orderkey.At(t2, id2)); got != want {
			t.Fatalf("(%v, %q) vs (%v, %q): byte order %d, want %d", t1, id1, t2, id2, got, want)
		}
	}
	if n := len(orderkey.AppendTime(nil, time.Now())); n != orderkey.TimeLen {
		t.Fatalf("an instant encodes in %d bytes, want %d", n, orderkey.TimeLen)
	}
}
