package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockDir takes an exclusive flock on cache/localpg.lock, waiting (and
// honouring ctx) while another process holds it. The lock is released by the
// returned function, or by the kernel when the process dies.
func lockDir(ctx context.Context, cache string, opts Options) (func(), error) {
	path := filepath.Join(cache, "localpg.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("localpg: lock file: %w", err)
	}
	fd := int(f.Fd())
	waited := false
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("localpg: flock %s: %w", path, err)
		}
		if !waited {
			opts.logf("waiting for %s (another Ensure is building or starting the cluster)", path)
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("localpg: waiting for %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}
