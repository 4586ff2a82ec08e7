package client

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestErrorAnswersBecomeProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, ctype, body string
		status            int
		want              Problem
		wantDenied        bool
		wantError         string
	}{
		{name: "a policy denial carries its rules and decision", status: 403, ctype: "application/problem+json",
			body: `{"type":"urn:sandgate:problem:policy_denied","title":"Denied by policy","status":403,"detail":"T2: session token is bound to another sandbox",
			  "code":"policy_denied","rule_ids":["T2"],"violations":[{"rule":"T2","msg":"session token is bound to another sandbox"}],"decision_id":"5f0c","request_id":"9a1b"}`,
			want: Problem{Status: 403, Type: "urn:sandgate:problem:policy_denied", Code: CodePolicyDenied, Title: "Denied by policy",
				Detail: "T2: session token is bound to another sandbox", RuleIDs: []string{"T2"},
				Violations: []Violation{{Rule: "T2", Msg: "session token is bound to another sandbox"}}, DecisionID: "5f0c", RequestID: "9a1b"},
			wantDenied: true, wantError: "403 policy_denied: T2: session token is bound to another sandbox"},
		{name: "a 400 names its field", status: 400, ctype: "application/problem+json; charset=utf-8",
			body:      `{"status":400,"code":"invalid_request","title":"The request is invalid","detail":"ttl_seconds: is required","field":"ttl_seconds"}`,
			want:      Problem{Status: 400, Code: CodeInvalidRequest, Title: "The request is invalid", Detail: "ttl_seconds: is required", Field: "ttl_seconds"},
			wantError: "400 invalid_request: ttl_seconds: is required"},
		{name: "a full budget is a denial with its retry delay", status: 429, ctype: "application/problem+json",
			body:       `{"status":429,"code":"budget_exhausted","title":"Budget exhausted","detail":"B1: node worker-1 is full","rule_ids":["B1"]}`,
			want:       Problem{Status: 429, Code: CodeBudgetExhausted, Title: "Budget exhausted", Detail: "B1: node worker-1 is full", RuleIDs: []string{"B1"}, RetryAfter: 5 * time.Second},
			wantDenied: true, wantError: "429 budget_exhausted: B1: node worker-1 is full"},
		{name: "a revoked token is not a denial though it names T4", status: 401, ctype: "application/problem+json",
			body:      `{"status":401,"code":"unauthenticated","title":"Authentication required","detail":"the token was revoked","rule_ids":["T4"]}`,
			want:      Problem{Status: 401, Code: CodeUnauthenticated, Title: "Authentication required", Detail: "the token was revoked", RuleIDs: []string{"T4"}},
			wantError: "401 unauthenticated: the token was revoked"},
		{name: "a 409 without rules is not a denial", status: 409, ctype: "application/problem+json",
			body:      `{"status":409,"code":"sandbox_not_running","title":"The sandbox is not running","detail":"sandbox \"x\" is ended"}`,
			want:      Problem{Status: 409, Code: CodeSandboxNotRunning, Title: "The sandbox is not running", Detail: `sandbox "x" is ended`},
			wantError: `409 sandbox_not_running: sandbox "x" is ended`},
		{name: "the HTTP status wins over the document's", status: 503, ctype: "application/problem+json",
			body:      `{"status":200,"code":"unavailable","title":"Service unavailable"}`,
			want:      Problem{Status: 503, Code: CodeUnavailable, Title: "Service unavailable", RetryAfter: 5 * time.Second},
			wantError: "503 unavailable"},
		{name: "a proxy's HTML page keeps the status and an excerpt", status: 502, ctype: "text/html",
			body:      "<html>\n<body>Bad\tgateway</body>\n</html>",
			want:      Problem{Status: 502, Title: "Bad Gateway", Detail: "<html> <body>Bad gateway</body> </html>"},
			wantError: "502 bad gateway: <html> <body>Bad gateway</body> </html>"},
		{name: "JSON that is not a problem keeps an excerpt", status: 404, ctype: "application/json",
			body:      `{"message":"Not Found"}`,
			want:      Problem{Status: 404, Title: "Not Found", Detail: `{"message":"Not Found"}`},
			wantError: `404 not found: {"message":"Not Found"}`},
		{name: "a problem type that is broken JSON keeps an excerpt", status: 500, ctype: "application/problem+json",
			body:      `{"code":`,
			want:      Problem{Status: 500, Title: "Internal Server Error", Detail: `{"code":`},
			wantError: `500 internal server error: {"code":`},
		{name: "an empty body still says the status", status: 500,
			want:      Problem{Status: 500, Title: "Internal Server Error"},
			wantError: "500 internal server error"},
		{name: "control characters are dropped from an excerpt", status: 400, ctype: "text/plain",
			body:      "bad\x1b[31m\x00 input",
			want:      Problem{Status: 400, Title: "Bad Request", Detail: "bad[31m input"},
			wantError: "400 bad request: bad[31m input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := fakeGateway(t, tc.status, tc.ctype, tc.body)
			_, err := c.GetSandbox(t.Context(), "x")
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("err %T %v is not a *Problem", err, err)
			}
			if !equalProblem(*p, tc.want) {
				t.Fatalf("problem\n got %+v\nwant %+v", *p, tc.want)
			}
			if p.Denied() != tc.wantDenied {
				t.Fatalf("Denied() = %v", p.Denied())
			}
			if p.Error() != tc.wantError {
				t.Fatalf("Error() = %q, want %q", p.Error(), tc.wantError)
			}
		})
	}
}

func equalProblem(a, b Problem) bool {
	return a.Status == b.Status && a.Type == b.Type && a.Code == b.Code && a.Title == b.Title && a.Detail == b.Detail &&
		a.Field == b.Field && slices.Equal(a.RuleIDs, b.RuleIDs) && slices.Equal(a.Violations, b.Violations) &&
		a.DecisionID == b.DecisionID && a.RequestID == b.RequestID && a.RetryAfter == b.RetryAfter
}

func TestALongBodyIsCutToAnExcerpt(t *testing.T) {
	t.Parallel()
	c, _ := fakeGateway(t, 502, "text/plain", strings.Repeat("é", 300))
	_, err := c.ListHosts(t.Context())
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("err %v", err)
	}
	if !strings.HasSuffix(p.Detail, "...") || len(p.Detail) > excerptLen+len("...") {
		t.Fatalf("detail of %d bytes: %q", len(p.Detail), p.Detail)
	}
	if strings.ContainsRune(p.Detail, '\uFFFD') {
		t.Fatalf("detail holds a broken rune: %q", p.Detail)
	}
}

func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name, v string
		want    time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"a date in the future", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"a date in the past", now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"negative seconds", "-3", 0},
		{"garbage", "soon", 0},
		{"absent", "", 0},
	}
	for _, tc := range cases {
		if got := retryAfter(tc.v, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
