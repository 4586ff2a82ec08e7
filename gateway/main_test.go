package gateway_test

import (
	"testing"

	"sandgate/gateway/gatewaytest"
)

// TestMain lets this test binary be the replay worker its gateways start
// (gatewaytest.Main).
func TestMain(m *testing.M) { gatewaytest.Main(m) }
