package nomad

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// FuzzReadTail feeds readTail any answer body, as a node could send it
// (the frames carry what the sandbox wrote): it returns exactly the last
// limit bytes of the frames' data, never more, or an error when the body
// is not a sequence of StreamFrames, never both.
func FuzzReadTail(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte, limit uint32) {
		tail := int64(limit%(1<<17)) + 1 // Logs asks for a positive tail
		got, err := readTail(bytes.NewReader(body), tail)

		var all []byte
		var werr error
		dec := json.NewDecoder(bytes.NewReader(body))
		for {
			var fr api.StreamFrame
			if e := dec.Decode(&fr); e != nil {
				if !errors.Is(e, io.EOF) {
					werr = e
				}
				break
			}
			all = append(all, fr.Data...)
		}
		if werr != nil {
			if err == nil || got != nil {
				t.Fatalf("readTail = %q, %v for a body that is not frames (%v)", got, err, werr)
			}
			return
		}
		if err != nil {
			t.Fatalf("readTail: %v for frames", err)
		}
		want := all[max(0, int64(len(all))-tail):]
		if int64(len(got)) > tail || !bytes.Equal(got, want) {
			t.Fatalf("readTail kept %d bytes %q, want the last %d: %q", len(got), got, tail, want)
		}
	})
}
