package devcmd_test

import (
	"testing"

	"go.uber.org/goleak"
)

// fake-models serves from goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
