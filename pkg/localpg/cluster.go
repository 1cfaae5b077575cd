package localpg

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Paths inside the root (as the chrooted tools see them).
const (
	stateDir     = "/var/lib/alicia"            // owned by postgres
	dataDir      = stateDir + "/pgdata"         // PGDATA
	socketDir    = stateDir + "/run"            // unix socket
	serverLog    = stateDir + "/postgresql.log" // pg_ctl -l
	pwfileInRoot = stateDir + "/initdb-pwfile"  // removed after initdb
	initMarker   = stateDir + "/initdb-done"    // written after initdb
)

// startSettings are given at every start, so an existing cluster picks them
// up when it restarts: shared_buffers big enough for the HNSW index of a
// realistic memory table (≈ 8 KB per memory; PostgreSQL's 128 MB default
// holds ~16k memories, and every search beyond that reads pages it lost).
const startSettings = "-c shared_buffers=1GB"

// Server settings given to initdb (see the package documentation).
var serverSettings = []string{
	"listen_addresses=127.0.0.1",
	"unix_socket_directories=" + socketDir,
	"fsync=on",
	"full_page_writes=on",
	"synchronous_commit=off",
	"max_connections=300",
	"timezone=UTC",
	"log_timezone=UTC",
}

func (c *cluster) hostPath(p string) string { return filepath.Join(c.root, p) }
func (c *cluster) passwordFile() string     { return filepath.Join(c.cache, "localpg-password") }
func (c *cluster) portFile() string         { return filepath.Join(c.cache, "localpg-port") }

// postgresIDs returns the uid and gid of the root's postgres user.
func (c *cluster) postgresIDs() (uid, gid int, err error) {
	data, err := os.ReadFile(c.hostPath("/etc/passwd"))
	if err != nil {
		return 0, 0, fmt.Errorf("localpg: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 4 && fields[0] == "postgres" {
			uid, err1 := strconv.Atoi(fields[2])
			gid, err2 := strconv.Atoi(fields[3])
			if err1 != nil || err2 != nil {
				break
			}
			return uid, gid, nil
		}
	}
	return 0, 0, fmt.Errorf("localpg: no postgres user in %s/etc/passwd", c.root)
}

// pgCommand returns a command running a PostgreSQL tool inside the root as
// its postgres user.
func (c *cluster) pgCommand(ctx context.Context, tool string, args ...string) (*exec.Cmd, error) {
	uid, gid, err := c.postgresIDs()
	if err != nil {
		return nil, err
	}
	spec := fmt.Sprintf("%d:%d", uid, gid)
	all := append([]string{"--userspec=" + spec, "--groups=" + strconv.Itoa(gid), c.root, pgBin + "/" + tool}, args...)
	cmd := exec.CommandContext(ctx, c.chroot, all...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/var/lib/postgresql"}
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// runPG runs a PostgreSQL tool inside the root and returns its output.
func (c *cluster) runPG(ctx context.Context, tool string, args ...string) (string, error) {
	cmd, err := c.pgCommand(ctx, tool, args...)
	if err != nil {
		return "", err
	}
	// The postmaster started by pg_ctl gets its own process group, so that
	// ^C in a terminal running tests does not stop the shared cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ensureInit creates the cluster with initdb unless it already exists with
// its password file.
func (c *cluster) ensureInit(ctx context.Context) (err error) {
	if exists(c.hostPath(initMarker)) {
		if exists(c.passwordFile()) {
			return nil
		}
		c.opts.logf("password file %s is missing: recreating the cluster", c.passwordFile())
		if err := c.stop(ctx); err != nil {
			return err
		}
	}
	uid, gid, err := c.postgresIDs()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(c.hostPath(stateDir)); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	for _, d := range []string{stateDir, dataDir, socketDir} {
		if err := os.MkdirAll(c.hostPath(d), 0o700); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		if err := os.Chown(c.hostPath(d), uid, gid); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("localpg: password: %w", err)
	}
	password := hex.EncodeToString(raw[:])
	if err := writeSecret(c.passwordFile(), password, -1, -1); err != nil {
		return err
	}
	if err := writeSecret(c.hostPath(pwfileInRoot), password, uid, gid); err != nil {
		return err
	}
	// The password's copy inside the root is initdb's only: a copy left
	// behind is a secret on disk, reported.
	defer func() {
		if rmErr := os.Remove(c.hostPath(pwfileInRoot)); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("localpg: remove initdb's password file: %w", rmErr))
		}
	}()

	c.opts.logf("initdb %s", c.hostPath(dataDir))
	args := []string{"-D", dataDir, "-U", "postgres", "--pwfile=" + pwfileInRoot,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"}
	for _, s := range serverSettings {
		args = append(args, "-c", s)
	}
	if out, err := c.runPG(ctx, "initdb", args...); err != nil {
		return fmt.Errorf("localpg: initdb: %w\n%s", err, lastLines([]byte(out), 15))
	}
	if err := os.Remove(c.hostPath(pwfileInRoot)); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	return os.WriteFile(c.hostPath(initMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// localPeer matches the pg_hba.conf lines of clusters made before unix
// socket clients authenticated with the password: "local <db> <user> peer".
var localPeer = regexp.MustCompile(`(?m)^(local\s+\S+\s+\S+\s+)peer[ \t]*$`)

// ensureLocalAuth makes unix socket clients authenticate with the password
// like TCP ones (a test in its own network namespace reaches the cluster
// only through the socket). It reports whether pg_hba.conf changed, so a
// running server must reload it.
func (c *cluster) ensureLocalAuth() (bool, error) {
	path := c.hostPath(dataDir + "/pg_hba.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("localpg: %w", err)
	}
	fixed := localPeer.ReplaceAll(b, []byte("${1}scram-sha-256"))
	if string(fixed) == string(b) {
		return false, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("localpg: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	uid, gid := -1, -1
	if st != nil {
		uid, gid = int(st.Uid), int(st.Gid)
	}
	c.opts.logf("unix socket clients authenticate with the password (pg_hba.conf)")
	if err := writeSecret(path, string(fixed), uid, gid); err != nil {
		return false, err
	}
	return true, nil
}

// reload makes the running server read its configuration files again.
func (c *cluster) reload(ctx context.Context) error {
	if out, err := c.runPG(ctx, "pg_ctl", "reload", "-D", dataDir); err != nil {
		return fmt.Errorf("localpg: pg_ctl reload: %w\n%s", err, strings.TrimSpace(out))
	}
	return nil
}

// writeSecret writes s to path with mode 0600, owned by uid:gid when >= 0.
func writeSecret(path, s string, uid, gid int) error {
	if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if uid >= 0 {
		if err := os.Chown(path+".tmp", uid, gid); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	return nil
}

// url returns the URL of database db on port.
func (c *cluster) url(port int, db string) (string, error) {
	pw, err := os.ReadFile(c.passwordFile())
	if err != nil {
		return "", fmt.Errorf("localpg: password file: %w", err)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", strings.TrimSpace(string(pw))),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String(), nil
}

// running reports whether pg_ctl sees a live postmaster, and its port from
// postmaster.pid.
func (c *cluster) running(ctx context.Context) (bool, int, error) {
	cmd, err := c.pgCommand(ctx, "pg_ctl", "status", "-D", dataDir)
	if err != nil {
		return false, 0, err
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return false, 0, nil // not running
	case err != nil:
		return false, 0, fmt.Errorf("localpg: pg_ctl status: %w\n%s", err, out)
	}
	pid, err := os.ReadFile(c.hostPath(dataDir + "/postmaster.pid"))
	if err != nil {
		return false, 0, fmt.Errorf("localpg: %w", err)
	}
	lines := strings.Split(string(pid), "\n")
	if len(lines) < 4 {
		return false, 0, fmt.Errorf("localpg: short postmaster.pid")
	}
	// After a reboot the recorded pid may belong to another program; pg_ctl
	// and the postmaster would both take it for a live server.
	if cmdline, err := os.ReadFile("/proc/" + strings.TrimSpace(lines[0]) + "/cmdline"); err == nil && !strings.Contains(string(cmdline), "postgres") {
		c.opts.logf("removing stale postmaster.pid (pid %s is not PostgreSQL)", strings.TrimSpace(lines[0]))
		if err := os.Remove(c.hostPath(dataDir + "/postmaster.pid")); err != nil {
			return false, 0, fmt.Errorf("localpg: %w", err)
		}
		return false, 0, nil
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return false, 0, fmt.Errorf("localpg: postmaster.pid port: %w", err)
	}
	return true, port, nil
}

// ensureRunning reuses the running cluster or starts it, and returns its
// port once it answers.
func (c *cluster) ensureRunning(ctx context.Context) (int, error) {
	up, port, err := c.running(ctx)
	if err != nil {
		return 0, err
	}
	if up {
		if err := c.waitAnswers(ctx, port, 30*time.Second); err != nil {
			return 0, fmt.Errorf("localpg: cluster runs on port %d but does not answer (log: %s): %w", port, c.hostPath(serverLog), err)
		}
		return port, nil
	}
	var lastErr error
	for attempt := range 3 {
		port := c.choosePort(attempt == 0)
		if port == 0 {
			return 0, errors.New("localpg: no free port on 127.0.0.1")
		}
		c.opts.logf("starting PostgreSQL on 127.0.0.1:%d", port)
		out, err := c.runPG(ctx, "pg_ctl", "start", "-D", dataDir, "-l", serverLog, "-w", "-t", "60", "-o", "-p "+strconv.Itoa(port)+" "+startSettings)
		if err != nil {
			lastErr = fmt.Errorf("localpg: pg_ctl start: %w\n%s\nserver log: %s", err, strings.TrimSpace(out), c.hostPath(serverLog))
			continue
		}
		if err := os.WriteFile(c.portFile(), []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
			return 0, fmt.Errorf("localpg: %w", err)
		}
		if err := c.waitAnswers(ctx, port, 30*time.Second); err != nil {
			return 0, fmt.Errorf("localpg: started on port %d but does not answer (log: %s): %w", port, c.hostPath(serverLog), err)
		}
		return port, nil
	}
	return 0, lastErr
}

// choosePort returns the port used last time if it is free (and reuse is
// allowed), else a free port picked by the kernel.
func (c *cluster) choosePort(reuse bool) int {
	if reuse {
		if b, err := os.ReadFile(c.portFile()); err == nil {
			if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 {
				if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
					l.Close()
					return p
				}
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitAnswers polls a real connection to the postgres database until it
// works or timeout passes (a postmaster that is still starting refuses
// connections for a moment).
func (c *cluster) waitAnswers(ctx context.Context, port int, timeout time.Duration) error {
	u, err := c.url(port, "postgres")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := ping(ctx, u)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureDatabase creates the alicia database if it does not exist.
func (c *cluster) ensureDatabase(ctx context.Context, port int) error {
	u, err := c.url(port, "postgres")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("localpg: connect: %w", err)
	}
	defer conn.Close(context.Background())
	var found bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&found); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if found {
		return nil
	}
	c.opts.logf("creating database %s", Database)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{Database}.Sanitize()); err != nil {
		return fmt.Errorf("localpg: create database %s: %w", Database, err)
	}
	return nil
}

// stop stops the cluster if it runs.
func (c *cluster) stop(ctx context.Context) error {
	if !exists(c.hostPath(dataDir + "/PG_VERSION")) {
		return nil
	}
	up, _, err := c.running(ctx)
	if err != nil || !up {
		return err
	}
	c.opts.logf("stopping PostgreSQL")
	if out, err := c.runPG(ctx, "pg_ctl", "stop", "-D", dataDir, "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("localpg: pg_ctl stop: %w\n%s", err, strings.TrimSpace(out))
	}
	return nil
}
