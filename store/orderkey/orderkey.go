// Package orderkey encodes instants so that byte order is time order. Both
// stores build their ordering keys from it: bbolt's index keys, and the
// bytea position columns of PostgreSQL (whose bytea comparison is bytewise,
// so no collation can reorder ids).
package orderkey

import (
	"encoding/binary"
	"time"
)

// TimeLen is the length of an encoded instant.
const TimeLen = 12

// AppendTime appends t's 12-byte order-preserving encoding:
//
//	be64(uint64(Unix seconds) ^ 1<<63) | be32(nanoseconds)
//
// Flipping the sign bit of the seconds makes times before 1970, the zero
// time.Time included, sort first; the encoding is exact for every time a
// JSON round trip keeps, so no clamping merges two instants.
func AppendTime(dst []byte, t time.Time) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Unix())^(1<<63)) //nolint:gosec // a bit pattern, not a quantity
	return binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond()))  //nolint:gosec // 0..999999999 fits
}

// At returns the key of id at instant t: t's encoding, then id. Byte
// order is t order, then id order.
func At(t time.Time, id string) []byte {
	return append(AppendTime(make([]byte, 0, TimeLen+len(id)), t), id...)
}

// Earlier returns the earlier of a and b.
func Earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
