package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/policies"
)

// ctxWarnings holds the warn-mode violations of the request's decisions.
const ctxWarnings = "sandgate.warnings"

// maxWarningHeaders bounds the Warning headers of one answer.
const maxWarningHeaders = 8

// warn records the warn-mode violations of an allowed decision: each is a
// Warning header now (299, RFC 9111's "miscellaneous persistent warning")
// and a member of the JSON answer (warningSerializer).
func warn(c echo.Context, d policies.Decision) {
	if c == nil || len(d.Warnings) == 0 {
		return
	}
	have, _ := c.Get(ctxWarnings).([]policies.Violation)
	for _, v := range d.Warnings {
		if len(have) < maxWarningHeaders {
			msg := strings.ReplaceAll(wire.Printable(v.Msg), `"`, `'`)
			c.Response().Header().Add("Warning", fmt.Sprintf(`299 sandgate "%s: %s"`, v.Rule, clip.String(msg, 200)))
		}
		have = append(have, v)
	}
	c.Set(ctxWarnings, have)
}

// warningSerializer is Echo's JSON serializer with the request's
// warn-mode violations added to every JSON object it answers, as
// "warnings": [{rule, msg, mode}].
type warningSerializer struct{ echo.DefaultJSONSerializer }

// Serialize writes i, with the warnings member when there are any.
func (ws warningSerializer) Serialize(c echo.Context, i any, indent string) error {
	warnings, _ := c.Get(ctxWarnings).([]policies.Violation)
	if len(warnings) == 0 {
		return ws.DefaultJSONSerializer.Serialize(c, i, indent)
	}
	body, err := json.Marshal(i)
	if err != nil {
		return err
	}
	member, err := json.Marshal(warnings)
	if err != nil {
		return err
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		_, err = c.Response().Write(body) // not an object: the headers carry them
		return err
	}
	var out bytes.Buffer
	out.WriteString(`{"warnings":`)
	out.Write(member)
	if rest := bytes.TrimSpace(body[1:]); len(rest) > 0 && rest[0] != '}' {
		out.WriteByte(',')
	}
	out.Write(body[1:])
	_, err = c.Response().Write(out.Bytes())
	return err
}
