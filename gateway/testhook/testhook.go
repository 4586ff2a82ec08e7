// Package testhook marks the steps of a sandbox's create and end with named
// points where a test build of sandgate can be made to stop, so that a
// crash test can kill the process at exactly that step (test/crash).
//
// The gateway calls Pause(point) at each step. In a normal build Pause is
// an empty function the compiler inlines away: the production binary has
// no pause, reads no variable and carries none of this package's text.
// Built with the tag sandgate_testhooks (go build -tags sandgate_testhooks),
// Pause reads the environment once:
//
//   - SANDGATE_TESTHOOK_PAUSE names a point at which the process pauses for
//     its whole life;
//   - SANDGATE_TESTHOOK_PAUSE_FILE names a file read every time a point is
//     reached: the point it holds (one name, surrounding space ignored) is
//     the one that pauses, so a test can arm and disarm points of a running
//     process; a missing or empty file arms none;
//   - SANDGATE_TESTHOOK_OUT names a file that the pause line is appended to
//     instead of standard error.
//
// On reaching an armed point the goroutine writes the line
// "TESTHOOK paused <point>" and blocks forever; the rest of the process
// runs on, and the test is expected to kill it.
package testhook

// Point names one step of the gateway's work. Its string is the name tests
// and the environment use.
type Point string

// The points of POST /v1/sandboxes, in the order a create reaches them.
const (
	// CreateAuthorized: the create handler was entered: authentication and
	// the authz decision allowed it; nothing has been read or written.
	CreateAuthorized Point = "create.authorized"
	// CreateAdmitted: the admission decision allowed the rendered job,
	// inside the store's reservation transaction, before it commits: no
	// record, no budget held, no job.
	CreateAdmitted Point = "create.admitted"
	// CreateReserved: the record is stored as starting and holds its
	// budget; no job has been registered.
	CreateReserved Point = "create.reserved"
	// CreateRegistered: Nomad accepted the job; the record is starting.
	CreateRegistered Point = "create.registered"
	// CreatePlaced: the wait for the placement returned (running, failed
	// or still pending); the record is still starting.
	CreatePlaced Point = "create.placed"
	// CreateSettled: the placement's outcome is recorded (running with its
	// allocation, or failed and released); the answer is not yet written.
	CreateSettled Point = "create.settled"
)

// The points of DELETE /v1/sandboxes/{id} and of every other end of a live
// sandbox (the reaper, the usage monitor's reclaim, the allocation watch,
// which all end through the same steps as a destroy).
const (
	// DestroyAuthorized: the destroy handler was entered: authentication
	// and the authz decision allowed it; nothing has been changed.
	DestroyAuthorized Point = "destroy.authorized"
	// EndDecided: the lifecycle decision allowed ending the live record;
	// nothing has been changed.
	EndDecided Point = "end.decided"
	// EndPurged: Nomad purged the job; the record is still live and holds
	// its budget and its session token.
	EndPurged Point = "end.purged"
	// EndRecorded: the record is terminal; in the same store transaction
	// its budget was released and its session token revoked (the digest
	// cleared). The answer is not yet written.
	EndRecorded Point = "end.recorded"
)

// Points lists every point, create's in order, then the end's in order. A
// test that iterates it covers a new point without being changed.
var Points = []Point{
	CreateAuthorized, CreateAdmitted, CreateReserved, CreateRegistered, CreatePlaced, CreateSettled,
	DestroyAuthorized, EndDecided, EndPurged, EndRecorded,
}

// The environment a test build reads (see the package documentation).
const (
	EnvPause     = "SANDGATE_TESTHOOK_PAUSE"
	EnvPauseFile = "SANDGATE_TESTHOOK_PAUSE_FILE"
	EnvOut       = "SANDGATE_TESTHOOK_OUT"
)

// PausedLine is the line a test build writes when it pauses at p, without
// the newline.
func PausedLine(p Point) string { return "TESTHOOK paused " + string(p) }
