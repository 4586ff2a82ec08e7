package bolt

import (
	"encoding/binary"
	"fmt"
	"time"

	"sandgate/store"
	"sandgate/store/orderkey"
)

// Index keys. Each one ends in a record's id, and everything before the id
// is either fixed-length or length-prefixed, so a key splits back into its
// parts and a prefix scan can never run into another principal's, node's
// or state's keys, whatever bytes a principal, node or id holds (0x00 and
// 0xff included: a separator byte would be ambiguous for a value that
// contains it, a length is not). bbolt's key limit (32 KiB) bounds every
// part well below the 4-byte length.
//
//	time     = be64(uint64(Unix seconds) ^ 1<<63) | be32(nanoseconds)    12 bytes, byte order = time order
//	created  = time(CreatedAt) | id                                      byte order = CreatedAt, then ID
//	by_state     = state | created
//	by_principal = be32(len(principal)) | principal | state | created
//	by_node      = be32(len(node)) | node | state | created
//	by_expiry    = time(min(ExpiresAt, CeilingAt)) | id                  live records
//	by_ended     = time(EndedAt, or UpdatedAt when EndedAt is zero) | id  terminal records
//
// state is one byte (stateCodes). Flipping the sign bit of the seconds
// makes times before 1970, the zero time.Time included, sort first; the
// encoding is exact for every time a JSON round trip keeps, so "CreatedAt,
// then ID" order is byte order and no clamping merges two instants.
const timeLen = orderkey.TimeLen

// stateCodes are the one-byte state tags of the index keys. They are part
// of the file format: never renumber them.
var stateCodes = map[store.State]byte{
	store.StateStarting: 1,
	store.StateRunning:  2,
	store.StateFailed:   3,
	store.StateEnded:    4,
}

// allStates lists the four states in code order.
var allStates = []store.State{store.StateStarting, store.StateRunning, store.StateFailed, store.StateEnded}

// liveStates are the states that hold budget.
var liveStates = []store.State{store.StateStarting, store.StateRunning}

// appendTime appends t's 12-byte order-preserving encoding.
func appendTime(dst []byte, t time.Time) []byte { return orderkey.AppendTime(dst, t) }

// appendSized appends s preceded by its length.
func appendSized(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s))) //nolint:gosec // bbolt keys are at most 32 KiB
	return append(dst, s...)
}

// createdKey is rec's position in listing order.
func createdKey(rec store.Sandbox) []byte {
	return append(appendTime(make([]byte, 0, timeLen+len(rec.ID)), rec.CreatedAt), rec.ID...)
}

// statePrefix appends the by_state prefix of st, and is also the tail of
// a by_principal or by_node prefix.
func statePrefix(dst []byte, st store.State) []byte {
	return append(dst, stateCodes[st])
}

// ownerPrefix is the by_principal or by_node prefix of name in state st.
func ownerPrefix(name string, st store.State) []byte {
	return statePrefix(appendSized(make([]byte, 0, 4+len(name)+1), name), st)
}

// expiryKey is a live rec's by_expiry key: the earlier of its expiry and
// its ceiling, then its id.
func expiryKey(rec store.Sandbox) []byte {
	due := rec.ExpiresAt
	if rec.CeilingAt.Before(due) {
		due = rec.CeilingAt
	}
	return append(appendTime(nil, due), rec.ID...)
}

// endedKey is a terminal rec's by_ended key.
func endedKey(rec store.Sandbox) []byte {
	at := rec.EndedAt
	if at.IsZero() {
		at = rec.UpdatedAt
	}
	return append(appendTime(nil, at), rec.ID...)
}

// idOf returns the id at the end of a created, by_expiry or by_ended key.
func idOf(key []byte) ([]byte, error) {
	if len(key) <= timeLen {
		return nil, fmt.Errorf("index key %x too short", key)
	}
	return key[timeLen:], nil
}
