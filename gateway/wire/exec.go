package wire

// ExecResult is the answer of an exec (POST /v1/sandboxes/{id}/exec): a
// command's exit, failure or timeout is data in a 200, never an error.
type ExecResult struct {
	// Warnings are the rules in warn mode the request violated; the
	// gateway's JSON serializer puts the member first into any object it
	// answers (as on Sandbox).
	Warnings []Violation `json:"warnings,omitempty"`
	// ExitCode is nil only when the gateway gave up on the stream after
	// the timeout and its grace period, so no exit code arrived.
	ExitCode *int   `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// StdoutBytes and StderrBytes are all the command wrote, including
	// what was cut.
	StdoutBytes     int64 `json:"stdout_bytes"`
	StderrBytes     int64 `json:"stderr_bytes"`
	StdoutTruncated bool  `json:"stdout_truncated"`
	StderrTruncated bool  `json:"stderr_truncated"`
	// Truncated is StdoutTruncated || StderrTruncated.
	Truncated  bool  `json:"truncated"`
	TimedOut   bool  `json:"timed_out"`
	DurationMS int64 `json:"duration_ms"`
}

// Event names of a streaming exec (POST .../exec with Accept:
// text/event-stream). Every event has a sequence id; the stream is start,
// then stdout, stderr and keepalive events, then exactly one terminal
// event: exit (an exit status Nomad reported) or error (a StreamError).
const (
	EventStart     = "start"
	EventStdout    = "stdout"
	EventStderr    = "stderr"
	EventKeepalive = "keepalive"
	EventExit      = "exit"
	EventError     = "error"
)

// Codes of a streaming exec's error event.
const (
	StreamSandboxLost      = "sandbox_lost"
	StreamNomadUnavailable = "nomad_unavailable"
	StreamTimeout          = "timeout"
	StreamCancelled        = "cancelled"
)

// ExecStart is the start event: what the command runs under. Its members
// stand in the order the gateway has always written them (by name).
type ExecStart struct {
	MaxOutputBytes int64  `json:"max_output_bytes"`
	SandboxID      string `json:"sandbox_id"`
	TimeoutSeconds int64  `json:"timeout_seconds"`
}

// ExecKeepalive is the keepalive event of a quiet command.
type ExecKeepalive struct {
	ElapsedMS int64 `json:"elapsed_ms"`
}

// ExecOutput is a stdout or stderr event: Data as UTF-8 text, or as
// standard base64 (Encoding "base64") when the chunk's bytes are not
// valid UTF-8.
type ExecOutput struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
}

// ExecExit is the exit event: how a streamed command ended, as Nomad
// reported it.
type ExecExit struct {
	ExitCode        int   `json:"exit_code"`
	TimedOut        bool  `json:"timed_out"`
	StdoutBytes     int64 `json:"stdout_bytes"`
	StderrBytes     int64 `json:"stderr_bytes"`
	StdoutTruncated bool  `json:"stdout_truncated"`
	StderrTruncated bool  `json:"stderr_truncated"`
	DurationMS      int64 `json:"duration_ms"`
}

// StreamError is the error event: it ends a streaming exec that brought
// no exit status. Code is one of the Stream* constants.
type StreamError struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (e *StreamError) Error() string { return "sandgate: exec stream " + e.Code + ": " + e.Detail }
