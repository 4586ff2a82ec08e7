package bolt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// A page cursor is, in unpadded URL-safe base64:
//
//	version (1 byte) | mac (16 bytes) | created key of the last record read
//
// mac is HMAC-SHA-256, truncated, under the file's cursor key (meta) over
// the query's canonical form (plan.identity, which starts with the
// version) and the created key. A cursor therefore resumes only the query
// and the file that issued it: one edited, cut short, or handed to another
// query or another gateway's file fails the check. Forging one would gain
// nothing a caller cannot ask for anyway (a cursor only positions a scan
// that still applies every filter), but a refused cursor is a clear error
// rather than a silently wrong page.
const (
	cursorVersion = 1
	cursorMACLen  = 16
)

var cursorEncoding = base64.RawURLEncoding

// sealCursor returns the cursor that resumes p after the created key.
func (s *Store) sealCursor(p plan, created []byte) string {
	buf := make([]byte, 0, 1+cursorMACLen+len(created))
	buf = append(buf, cursorVersion)
	buf = append(buf, s.cursorMAC(p, created)...)
	return cursorEncoding.EncodeToString(append(buf, created...))
}

// openCursor checks a cursor against p and returns its created key.
func (s *Store) openCursor(p plan, cursor string) ([]byte, error) {
	raw, err := cursorEncoding.DecodeString(cursor)
	switch {
	case err != nil:
		return nil, invalid("cursor", "not a page cursor (it does not decode)")
	case len(raw) < 1+cursorMACLen+timeLen+1:
		return nil, invalid("cursor", "not a page cursor (too short)")
	case raw[0] != cursorVersion:
		return nil, invalid("cursor", fmt.Sprintf("cursor version %d is not one this sandgate issues", raw[0]))
	}
	mac, created := raw[1:1+cursorMACLen], raw[1+cursorMACLen:]
	if !hmac.Equal(mac, s.cursorMAC(p, created)) {
		return nil, invalid("cursor", "it was altered, or issued for another query or another store; start again without a cursor")
	}
	return created, nil
}

func (s *Store) cursorMAC(p plan, created []byte) []byte {
	h := hmac.New(sha256.New, s.cursorKey)
	h.Write(appendSized(nil, string(p.identity)))
	h.Write(created)
	return h.Sum(nil)[:cursorMACLen]
}
