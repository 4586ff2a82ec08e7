package nomad

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// JobInfo is the state of one of the gateway's jobs.
type JobInfo struct {
	ID string
	// Status is Nomad's job status: "pending", "running" or "dead".
	Status string
	// Stop reports that the job was stopped (deregistered without purge).
	Stop bool
}

// Register submits job and returns the ID of the evaluation Nomad created.
// A job whose ID or Name lacks Config.JobPrefix, or whose Namespace is not
// the client's, is refused with ErrForbiddenJob before any request. Nomad
// answers an invalid job with HTTP 500: that is an *Error with Status 500,
// Nomad's message in Msg, and ErrUnavailable. job is not modified.
func (c *Client) Register(ctx context.Context, job *api.Job) (evalID string, err error) {
	return call(ctx, c, OpRegister, func(ctx context.Context) (string, error) {
		if err := c.checkJob(job); err != nil {
			return "", err
		}
		resp, _, err := c.api.Jobs().Register(job, write(ctx))
		if err != nil {
			return "", err
		}
		return resp.EvalID, nil
	})
}

// Job reads one of the gateway's jobs; an unknown (or purged) job is
// ErrNotFound, an ID without the prefix ErrForbiddenJob.
func (c *Client) Job(ctx context.Context, id string) (JobInfo, error) {
	return call(ctx, c, OpJob, func(ctx context.Context) (JobInfo, error) {
		if err := c.checkJobID(OpJob, id); err != nil {
			return JobInfo{}, err
		}
		job, _, err := c.api.Jobs().Info(id, query(ctx))
		if err != nil {
			return JobInfo{}, err
		}
		return JobInfo{ID: deref(job.ID), Status: deref(job.Status), Stop: deref(job.Stop)}, nil
	})
}

// ListJobs lists the gateway's jobs: those whose ID carries JobPrefix (asked
// of Nomad with the prefix query, and checked again here), sorted by ID.
func (c *Client) ListJobs(ctx context.Context) ([]JobInfo, error) {
	return call(ctx, c, OpListJobs, func(ctx context.Context) ([]JobInfo, error) {
		q := query(ctx)
		q.Prefix = c.cfg.JobPrefix
		stubs, _, err := c.api.Jobs().List(q)
		if err != nil {
			return nil, err
		}
		out := make([]JobInfo, 0, len(stubs))
		for _, s := range stubs { // api sorts by ID
			if c.hasPrefix(s.ID) {
				out = append(out, JobInfo{ID: s.ID, Status: s.Status, Stop: s.Stop})
			}
		}
		return out, nil
	})
}

// Purge deregisters the job with purge=true: Nomad stops its allocations and
// forgets the job at once (finished allocations stay readable until garbage
// collection). An unknown job is success. An ID without the prefix is refused
// with ErrForbiddenJob before any request.
func (c *Client) Purge(ctx context.Context, id string) error {
	_, err := call(ctx, c, OpPurge, func(ctx context.Context) (struct{}, error) {
		if err := c.checkJobID(OpPurge, id); err != nil {
			return struct{}{}, err
		}
		_, _, err := c.api.Jobs().Deregister(id, true, write(ctx))
		if err != nil && isNotFound(err) {
			err = nil // Nomad 1.6 answers 200 here; a 404 means the same
		}
		return struct{}{}, err
	})
	return err
}

// checkJobID refuses an ID outside the gateway's prefix.
func (c *Client) checkJobID(op, id string) error {
	if !c.hasPrefix(id) {
		return c.newError(op, 0, fmt.Sprintf("job id %q lacks the prefix %q", id, c.cfg.JobPrefix), ErrForbiddenJob)
	}
	return nil
}

// checkJob refuses a job the gateway must not submit: no ID, an ID or Name
// without the prefix (an empty Name defaults to the ID), or a namespace other
// than the client's.
func (c *Client) checkJob(job *api.Job) error {
	if job == nil {
		return c.newError(OpRegister, 0, "nil job", nil)
	}
	id := deref(job.ID)
	if err := c.checkJobID(OpRegister, id); err != nil {
		return err
	}
	if name := deref(job.Name); name != "" && !c.hasPrefix(name) {
		return c.newError(OpRegister, 0, fmt.Sprintf("job name %q lacks the prefix %q", name, c.cfg.JobPrefix), ErrForbiddenJob)
	}
	want := c.cfg.Namespace
	if want == "" {
		want = "default"
	}
	if ns := deref(job.Namespace); ns != "" && ns != want {
		return c.newError(OpRegister, 0, fmt.Sprintf("job namespace %q is not the client's %q", ns, want), ErrForbiddenJob)
	}
	return nil
}

// hasPrefix reports whether id is one of the gateway's jobs: it carries the
// prefix and something after it.
func (c *Client) hasPrefix(id string) bool {
	return len(id) > len(c.cfg.JobPrefix) && strings.HasPrefix(id, c.cfg.JobPrefix)
}

// deref returns *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
