package localpg

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/alicia-voice/alicia/pkg/childproc"
)

// lockDir takes an exclusive flock on cache/localpg.lock, waiting (and
// honouring ctx) while another process holds it, and saying so once. The
// lock is released by the returned function, or by the kernel when the
// process dies.
func lockDir(ctx context.Context, cache string, opts Options) (func(), error) {
	path := filepath.Join(cache, "localpg.lock")
	now, cancel := context.WithCancel(ctx)
	cancel() // one attempt, without waiting
	if unlock, err := childproc.LockFile(now, path); err == nil {
		return unlock, nil
	}
	opts.logf("waiting for %s (another Ensure is building or starting the cluster)", path)
	unlock, err := childproc.LockFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	return unlock, nil
}
