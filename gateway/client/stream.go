package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"sandgate/gateway/wire"
)

// Event names of a streaming exec (ExecStream).
const (
	EventStart     = wire.EventStart
	EventStdout    = wire.EventStdout
	EventStderr    = wire.EventStderr
	EventKeepalive = wire.EventKeepalive
	EventExit      = wire.EventExit
	EventError     = wire.EventError
)

// ExecEvent is one Server-Sent Event of a streaming exec.
type ExecEvent struct {
	// ID is the event's sequence number, from 1.
	ID int
	// Event is one of the Event constants.
	Event string
	// Data is the event's JSON.
	Data json.RawMessage
	// Output is a stdout or stderr event's bytes, decoded.
	Output []byte
	// Exit is the exit event's content.
	Exit *ExecExit
	// Error is the error event's content.
	Error *StreamError
}

// ExecExit is how a streamed command ended, as Nomad reported it
// (wire.ExecExit).
type ExecExit = wire.ExecExit

// StreamError ends a streaming exec that brought no exit status
// (wire.StreamError). Code is sandbox_lost, nomad_unavailable, timeout or
// cancelled.
type StreamError = wire.StreamError

// ErrStreamEnded means the stream closed without a terminal (exit or
// error) event: the connection broke.
var ErrStreamEnded = errors.New("client: the exec stream ended without an exit or error event")

// ExecStream is POST /v1/sandboxes/{id}/exec as Server-Sent Events: it
// yields every event as it arrives, through the terminal exit or error
// event. A refusal before the stream starts is yielded as a *Problem; a
// stream that closes without a terminal event yields ErrStreamEnded.
// Stop ranging to cancel the call (the gateway then stops the command).
func (c *Client) ExecStream(ctx context.Context, id string, req ExecRequest) iter.Seq2[ExecEvent, error] {
	return func(yield func(ExecEvent, error) bool) {
		seg, err := segment("sandbox id", id)
		if err != nil {
			yield(ExecEvent{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		body, err := json.Marshal(req)
		if err != nil {
			yield(ExecEvent{}, err)
			return
		}
		target := c.base.String() + "/v1/sandboxes/" + seg + "/exec"
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			yield(ExecEvent{}, err)
			return
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream, application/problem+json")
		hreq.Header.Set("User-Agent", c.ua)
		if c.token != "" {
			hreq.Header.Set("Authorization", "Bearer "+c.token)
		}
		// The stream lasts as long as the command: no client-wide timeout.
		hc := *c.http
		hc.Timeout = 0
		resp, err := hc.Do(hreq)
		if err != nil {
			yield(ExecEvent{}, transportError(http.MethodPost, target, err))
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			yield(ExecEvent{}, readProblem(resp))
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev ExecEvent
		for sc.Scan() {
			line := sc.Text()
			if line != "" {
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "id":
					ev.ID, _ = strconv.Atoi(value)
				case "event":
					ev.Event = value
				case "data":
					ev.Data = append(ev.Data, value...)
				}
				continue
			}
			if ev.Event == "" {
				continue
			}
			if err := ev.decode(); err != nil {
				yield(ev, err)
				return
			}
			if !yield(ev, nil) || ev.Event == EventExit || ev.Event == EventError {
				return
			}
			ev = ExecEvent{}
		}
		if err := sc.Err(); err != nil {
			yield(ExecEvent{}, transportError(http.MethodPost, target, err))
			return
		}
		yield(ExecEvent{}, ErrStreamEnded)
	}
}

// decode fills Output, Exit or Error from Data.
func (e *ExecEvent) decode() error {
	switch e.Event {
	case EventStdout, EventStderr:
		var out wire.ExecOutput
		if err := json.Unmarshal(e.Data, &out); err != nil {
			return fmt.Errorf("client: %s event: %w", e.Event, err)
		}
		switch out.Encoding {
		case "base64":
			b, err := base64.StdEncoding.DecodeString(out.Data)
			if err != nil {
				return fmt.Errorf("client: %s event: %w", e.Event, err)
			}
			e.Output = b
		default:
			e.Output = []byte(out.Data)
		}
	case EventExit:
		e.Exit = new(ExecExit)
		if err := json.Unmarshal(e.Data, e.Exit); err != nil {
			return fmt.Errorf("client: exit event: %w", err)
		}
	case EventError:
		e.Error = new(StreamError)
		if err := json.Unmarshal(e.Data, e.Error); err != nil {
			return fmt.Errorf("client: error event: %w", err)
		}
	}
	return nil
}
