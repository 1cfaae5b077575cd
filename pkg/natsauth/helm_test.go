package natsauth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// TestHelmValues: the Helm chart's example values for the official nats
// chart hold HelmValues, the same table as deploy/nats.conf (what the nats
// chart makes of them, and that nats-server reads the users of
// deploy/nats.conf from them, is checked by deploy/checks/helm).
func TestHelmValues(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "helm", "alicia", "examples", "nats-auth-values.yaml")
	want := natsauth.HelmValues(natsauth.HelmSecret)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from natsauth.HelmValues: run go test ./pkg/natsauth -run TestHelmValues -update", path)
	}
}
