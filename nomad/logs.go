package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/hashicorp/nomad/api"
)

// Logs returns the last tailBytes bytes of a task's stdout or stderr
// (stream "stdout" or "stderr"), never more; the whole log when it is
// shorter. It asks Nomad for origin=end, offset=tailBytes, follow=false and
// decodes the framed (plain=false) answer through the configured address,
// without the direct-to-node attempt of api.AllocFS. An unknown allocation,
// and a task that has written no log yet, are ErrNotFound.
func (c *Client) Logs(ctx context.Context, allocID, task, stream string, tailBytes int64) ([]byte, error) {
	return call(ctx, c, OpLogs, func(ctx context.Context) ([]byte, error) {
		if !validID(allocID) {
			return nil, c.newError(OpLogs, 0, fmt.Sprintf("invalid allocation id %q", allocID), ErrNotFound)
		}
		if stream != "stdout" && stream != "stderr" {
			return nil, c.newError(OpLogs, 0, fmt.Sprintf("stream %q is neither stdout nor stderr", stream), nil)
		}
		if task == "" || tailBytes <= 0 {
			return nil, c.newError(OpLogs, 0, "task and a positive tailBytes are required", nil)
		}
		q := query(ctx)
		q.Params = map[string]string{
			"task":   task,
			"type":   stream,
			"origin": "end",
			"offset": strconv.FormatInt(tailBytes, 10),
			"plain":  "false",
			"follow": "false",
		}
		body, err := c.api.Raw().Response("/v1/client/fs/logs/"+allocID, q)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return readTail(body, tailBytes)
	})
}

// readTail decodes StreamFrames (JSON objects back to back, heartbeats
// included) and keeps the last limit bytes of their data.
func readTail(r io.Reader, limit int64) ([]byte, error) {
	dec := json.NewDecoder(r)
	buf := []byte{}
	for {
		var f api.StreamFrame
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return nil, err
		}
		data := f.Data
		if int64(len(data)) >= limit {
			buf = append(buf[:0], data[int64(len(data))-limit:]...)
			continue
		}
		if over := int64(len(buf)+len(data)) - limit; over > 0 {
			buf = buf[:copy(buf, buf[over:])]
		}
		buf = append(buf, data...)
	}
}
