package wire

import (
	"maps"
	"slices"
)

// Problem codes of docs/api.md ("Errors"): the stable, machine-readable
// part of every problem document. Branch on Problem.Code.
const (
	CodeInvalidRequest    = "invalid_request"     // 400
	CodeUnauthenticated   = "unauthenticated"     // 401
	CodeTokenExpired      = "token_expired"       // 401
	CodePolicyDenied      = "policy_denied"       // 403
	CodeSandboxNotFound   = "sandbox_not_found"   // 404
	CodeRouteNotFound     = "not_found"           // 404: no route matches the path
	CodeMethodNotAllowed  = "method_not_allowed"  // 405
	CodeRequestTimeout    = "request_timeout"     // 408: the body did not arrive in time
	CodePayloadTooLarge   = "payload_too_large"   // 413
	CodeHeaderTooLarge    = "header_too_large"    // 431
	CodeInternalError     = "internal_error"      // 500
	CodeNomadUnavailable  = "nomad_unavailable"   // 503
	CodeUnavailable       = "unavailable"         // 503
	CodeRateLimited       = "rate_limited"        // 429: the caller's token bucket is empty (Q1)
	CodeBudgetExhausted   = "budget_exhausted"    // 429
	CodeNoEnrolledNode    = "no_enrolled_node"    // 409
	CodeSandboxNotRunning = "sandbox_not_running" // 409
	CodeSandboxExpired    = "sandbox_expired"     // 410
	CodeSandboxEnded      = "sandbox_ended"       // 410
	CodeSandboxLost       = "sandbox_lost"        // 410
	// CodePlacementFailed: Nomad refused to place the sandbox (429 when the
	// node was full, 503 otherwise) or its task failed to start; nothing
	// is left and the budget is released. Retry-After says when to retry.
	CodePlacementFailed = "placement_failed"

	// Hosts and tokens.
	CodeHostNotFound    = "host_not_found"    // 404
	CodeHostNotEnrolled = "host_not_enrolled" // 409
	CodeSandboxesLive   = "sandboxes_live"    // 409: the host still runs sandboxes
	CodeTokenNotFound   = "token_not_found"   // 404

	// Policy evaluation and idempotency.
	CodePolicyBusy                 = "policy_busy"                  // 429
	CodeEvaluationDeadlineExceeded = "evaluation_deadline_exceeded" // 422
	CodeCandidateExceededLimits    = "candidate_exceeded_limits"    // 422
	CodeIdempotencyKeyReused       = "idempotency_key_reused"       // 422

	// The files API's (WriteFile, ReadFile, ListFiles, DeleteFile).
	CodeLengthRequired    = "length_required"     // 411: a write without its size
	CodeFileNotFound      = "file_not_found"      // 404
	CodePathEscapesRoots  = "path_escapes_roots"  // 403: a symbolic link leads out of files.roots
	CodeIsDirectory       = "is_a_directory"      // 409: a write onto a directory
	CodeNotDirectory      = "not_a_directory"     // 409: a component on the way is a file
	CodeDirectoryNotEmpty = "directory_not_empty" // 409: a delete without recursive
	CodeNotRegularFile    = "not_a_regular_file"  // 422: a FIFO, socket or device
	CodeFileTooLarge      = "file_too_large"      // 422: beyond files.max_read_bytes
	CodeImageLacksTools   = "image_lacks_tools"   // 422: the image has no sh, cat, stat...
	CodeIncompleteBody    = "incomplete_body"     // 400: fewer bytes than the size arrived; nothing written
	CodeWriteFailed       = "write_failed"        // 409: a read-only or full filesystem, no permission
	CodeFilesTimeout      = "files_timeout"       // 504: beyond files.timeout_seconds
)

// code is what the API says of a problem code: the HTTP status it answers
// with (docs/api.md's table) and its fixed RFC 9457 title.
type code struct {
	status int
	title  string
}

var codes = map[string]code{ //nolint:gosec // G101: titles of error codes, not credentials
	CodeInvalidRequest:             {400, "The request is invalid"},
	CodeIncompleteBody:             {400, "The body ended before its Content-Length"},
	CodeUnauthenticated:            {401, "Authentication required"},
	CodeTokenExpired:               {401, "The token has expired"},
	CodePolicyDenied:               {403, "Denied by policy"},
	CodePathEscapesRoots:           {403, "The path leaves the allowed roots through a symbolic link"},
	CodeSandboxNotFound:            {404, "No such sandbox"},
	CodeRouteNotFound:              {404, "No such route"},
	CodeHostNotFound:               {404, "No such host"},
	CodeTokenNotFound:              {404, "No such token"},
	CodeFileNotFound:               {404, "No such file or directory in the sandbox"},
	CodeMethodNotAllowed:           {405, "Method not allowed"},
	CodeRequestTimeout:             {408, "The request body did not arrive in time"},
	CodeSandboxNotRunning:          {409, "The sandbox is not running"},
	CodeHostNotEnrolled:            {409, "The host is not enrolled"},
	CodeSandboxesLive:              {409, "Sandboxes are live on the host"},
	CodeNoEnrolledNode:             {409, "No node can host a sandbox"},
	CodeIsDirectory:                {409, "The path is a directory"},
	CodeNotDirectory:               {409, "A component of the path is not a directory"},
	CodeDirectoryNotEmpty:          {409, "The directory is not empty"},
	CodeWriteFailed:                {409, "The sandbox's filesystem refused the write"},
	CodeSandboxExpired:             {410, "The sandbox has expired"},
	CodeSandboxEnded:               {410, "The sandbox has ended"},
	CodeSandboxLost:                {410, "The sandbox was lost"},
	CodeLengthRequired:             {411, "Content-Length is required"},
	CodePayloadTooLarge:            {413, "The request body is too large"},
	CodeFileTooLarge:               {422, "The file is larger than a read returns"},
	CodeNotRegularFile:             {422, "The path is not a regular file or a directory"},
	CodeImageLacksTools:            {422, "The image lacks the tools file operations need"},
	CodeIdempotencyKeyReused:       {422, "The Idempotency-Key was used with another body"},
	CodeEvaluationDeadlineExceeded: {422, "The evaluation ran past its deadline"},
	CodeCandidateExceededLimits:    {422, "The candidate bundle ran past a limit of its worker"},
	CodeBudgetExhausted:            {429, "Budget exhausted"},
	CodePolicyBusy:                 {429, "As many policy evaluations of this kind as allowed are running"},
	CodeRateLimited:                {429, "Too many requests"},
	CodePlacementFailed:            {429, "Nomad could not place or start the sandbox"}, // 503 too
	CodeHeaderTooLarge:             {431, "The request headers are too large"},
	CodeInternalError:              {500, "Internal error"},
	CodeNomadUnavailable:           {503, "Nomad is unavailable"},
	CodeUnavailable:                {503, "Service unavailable"},
	CodeFilesTimeout:               {504, "The file operation timed out"},
}

// Codes are every problem code the gateway answers, sorted.
func Codes() []string { return slices.Sorted(maps.Keys(codes)) }

// Status is the HTTP status a problem code answers with (placement_failed:
// 429, or 503 when the node was not full); 0 for a code the API does not
// have.
func Status(code string) int { return codes[code].status }

// Title is a problem code's fixed title; "" for a code the API does not
// have.
func Title(code string) string { return codes[code].title }

// Titles maps every problem code to its title; the map is the caller's.
func Titles() map[string]string {
	out := make(map[string]string, len(codes))
	for c, v := range codes {
		out[c] = v.title
	}
	return out
}
