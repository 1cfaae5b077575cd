package localpg

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestUnescapeMount(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "/a/b", "/a/b"},
		{"space", `/a\040b`, "/a b"},
		{"tab and backslash", `/a\011\134`, "/a\t\\"},
		{"short escape kept", `/a\04`, `/a\04`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unescapeMount(tc.in); got != tc.want {
				t.Fatalf("unescapeMount(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestRemoveRootDetachesMounts checks that removing a half-built root never
// deletes through a mount left inside it.
func TestRemoveRootDetachesMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	outside := t.TempDir()
	sentinel := filepath.Join(outside, "keep")
	if err := os.WriteFile(sentinel, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "pgroot")
	mnt := filepath.Join(root, "proc")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(outside, mnt, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount not permitted here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	if m, err := mountsUnder(root); err != nil || len(m) != 1 || m[0] != mnt {
		t.Fatalf("mountsUnder = %v, %v; want [%s]", m, err, mnt)
	}
	if err := removeRoot(root); err != nil {
		t.Fatalf("removeRoot: %v", err)
	}
	if exists(root) {
		t.Fatal("root still exists")
	}
	if !exists(sentinel) {
		t.Fatal("removeRoot deleted a file through a mount")
	}
}
