package localpg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

const (
	// suite is the Debian release of the root: the first with a pgvector
	// package for PostgreSQL 17.
	suite = "trixie"
	// pgBin is where postgresql-17 puts its server binaries inside the root.
	pgBin = "/usr/lib/postgresql/17/bin"
	// markerBootstrapped is written in the root once debootstrap succeeded.
	markerBootstrapped = ".alicia-debootstrapped"
	// markerReady is written in the root once the packages are installed.
	markerReady = ".alicia-ready"
)

// packages installed inside the root.
var packages = []string{"postgresql-17", "postgresql-17-pgvector"}

// cluster is the private cluster under cache.
type cluster struct {
	opts   Options
	cache  string // the cache directory
	root   string // the Debian root, cache/pgroot
	chroot string // path of the chroot binary
}

// buildLog is where the output of debootstrap and apt-get goes.
func (c *cluster) buildLog() string { return filepath.Join(c.cache, "pgroot-build.log") }

// ensureRoot makes sure the Debian root with PostgreSQL 17 and pgvector
// exists, building what is missing. A root without the debootstrap marker is
// half-built and is removed first; a root whose package installation failed
// is removed too, so the next call starts from scratch.
func (c *cluster) ensureRoot(ctx context.Context) error {
	if exists(filepath.Join(c.root, markerReady)) {
		return nil
	}
	start := time.Now()
	if !exists(filepath.Join(c.root, markerBootstrapped)) {
		if exists(c.root) {
			c.opts.logf("removing half-built root %s", c.root)
			if err := removeRoot(c.root); err != nil {
				return err
			}
		}
		if err := c.debootstrap(ctx); err != nil {
			return err
		}
	}
	if err := c.installPackages(ctx); err != nil {
		if rmErr := removeRoot(c.root); rmErr != nil {
			return errors.Join(err, rmErr)
		}
		return err
	}
	if err := os.WriteFile(filepath.Join(c.root, markerReady), []byte(strings.Join(packages, " ")+"\n"), 0o644); err != nil {
		return fmt.Errorf("localpg: write marker: %w", err)
	}
	c.opts.logf("root ready in %s", time.Since(start).Round(time.Second))
	return nil
}

// debootstrap creates a minimal Debian root.
func (c *cluster) debootstrap(ctx context.Context) error {
	bin, err := exec.LookPath("debootstrap")
	if err != nil {
		bin = "/usr/sbin/debootstrap"
		if !exists(bin) {
			return errors.New("localpg: debootstrap is not installed; install it with `apt-get install debootstrap` (or set " + EnvURL + ")")
		}
	}
	c.opts.logf("debootstrap --variant=minbase %s %s %s (about a minute; log in %s)", suite, c.root, c.opts.mirror(), c.buildLog())
	cmd := exec.CommandContext(ctx, bin, "--variant=minbase", suite, c.root, c.opts.mirror())
	cmd.Env = append(os.Environ(), "LANG=C.UTF-8")
	if err := c.runLogged(cmd); err != nil {
		if rmErr := removeRoot(c.root); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		return fmt.Errorf("localpg: debootstrap: %w", err)
	}
	return os.WriteFile(filepath.Join(c.root, markerBootstrapped), []byte(suite+"\n"), 0o644)
}

// installPackages installs PostgreSQL 17 and pgvector with apt-get inside the
// root. Services are kept from starting (policy-rc.d) and postgresql-common
// is told not to create its default cluster: Ensure makes its own.
func (c *cluster) installPackages(ctx context.Context) error {
	c.opts.logf("installing %s in the root (about 30 s)", strings.Join(packages, " "))
	policy := filepath.Join(c.root, "usr/sbin/policy-rc.d")
	if err := os.WriteFile(policy, []byte("#!/bin/sh\n# Written by Alicia's localpg: no service starts inside this root.\nexit 101\n"), 0o755); err != nil {
		return fmt.Errorf("localpg: policy-rc.d: %w", err)
	}
	confDir := filepath.Join(c.root, "etc/postgresql-common")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "createcluster.conf"), []byte("create_main_cluster = false\n"), 0o644); err != nil {
		return fmt.Errorf("localpg: createcluster.conf: %w", err)
	}
	steps := [][]string{
		{"dpkg", "--configure", "-a"},
		{"apt-get", "update", "-q"},
		append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends",
			"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}, packages...),
		{"apt-get", "clean"},
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, c.chroot, append([]string{c.root}, args...)...)
		cmd.Env = []string{
			"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
			"LANG=C.UTF-8",
			"DEBIAN_FRONTEND=noninteractive",
		}
		if err := c.runLogged(cmd); err != nil {
			return fmt.Errorf("localpg: chroot %s: %w", strings.Join(args, " "), err)
		}
	}
	if !exists(filepath.Join(c.root, pgBin, "initdb")) {
		return fmt.Errorf("localpg: %s/initdb missing after installing %s", pgBin, strings.Join(packages, " "))
	}
	return nil
}

// runLogged runs cmd with its output appended to the build log; on failure
// the error carries the last lines of that output.
func (c *cluster) runLogged(cmd *exec.Cmd) (err error) {
	f, err := os.OpenFile(c.buildLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("localpg: build log: %w", cerr))
		}
	}()
	fmt.Fprintf(f, "\n=== %s %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	var tail bytes.Buffer
	w := &tailWriter{w: f, buf: &tail}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, lastLines(tail.Bytes(), 15))
	}
	return nil
}

// tailWriter copies to w and keeps the last 64 KiB in buf.
type tailWriter struct {
	w   *os.File
	buf *bytes.Buffer
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > 64<<10 {
		t.buf.Next(t.buf.Len() - 64<<10)
	}
	return t.w.Write(p)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeRoot deletes a root, first detaching anything still mounted under it
// (debootstrap mounts /proc and /sys inside the target while it runs; a
// killed run can leave them). It refuses to delete while a mount remains, so
// that RemoveAll never walks into the host's /proc, /sys or /dev.
func removeRoot(root string) error {
	for range 3 {
		mounts, err := mountsUnder(root)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			if err := os.RemoveAll(root); err != nil {
				return fmt.Errorf("localpg: remove %s: %w", root, err)
			}
			return nil
		}
		// Deepest first.
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	return fmt.Errorf("localpg: %s still has mounts under it; unmount them and remove it by hand", root)
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("localpg: read mounts: %w", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for a space...) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				v = v*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
