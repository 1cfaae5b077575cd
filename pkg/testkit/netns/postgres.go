package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/localpg"
)

// noPostgres is the URL the child gets when the parent found no server: a
// socket directory that does not exist, so pgtest reports the server
// missing at once instead of starting a cluster it cannot reach.
const noPostgres = "postgres://postgres@/alicia?host=/nonexistent/netns-found-no-postgres&connect_timeout=1"

// postgresForChild resolves the Postgres server and returns its URL in
// unix-socket form for the child, and a function stopping the relay (if
// one was needed).
func postgresForChild() (string, func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	u, stop, err := socketURL(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: Postgres will not be reachable inside the network namespace: %v\n", err)
		return noPostgres, func() {}
	}
	return u, stop
}

func socketURL(ctx context.Context) (string, func(), error) {
	nothing := func() {}
	raw, err := localpg.Ensure(ctx, localpg.Options{})
	if err != nil {
		return "", nothing, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nothing, fmt.Errorf("%s is not a postgres:// URL", localpg.EnvURL)
	}
	q := u.Query()
	if strings.HasPrefix(q.Get("host"), "/") || (u.Host == "" && q.Get("host") == "") {
		return raw, nothing, nil // already a unix socket
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	if os.Getenv(localpg.EnvURL) == "" {
		dir, err := localpg.SocketDir(localpg.Options{})
		if err != nil {
			return "", nothing, err
		}
		s := withSocket(u, dir, port)
		return s, nothing, waitPing(ctx, s)
	}
	r, err := startRelay(net.JoinHostPort(host, port), port)
	if err != nil {
		return "", nothing, err
	}
	s := withSocket(u, r.dir, port)
	if err := waitPing(ctx, s); err != nil {
		r.stop()
		return "", nothing, err
	}
	return s, r.stop, nil
}

// withSocket returns u pointing at the unix socket dir/.s.PGSQL.port.
func withSocket(u *url.URL, dir, port string) string {
	c := *u
	c.Host = ""
	q := c.Query()
	q.Set("host", dir)
	q.Set("port", port)
	c.RawQuery = q.Encode()
	return c.String()
}

// waitPing connects through the socket until it works (the cluster may have
// just reloaded pg_hba.conf) or 10 s pass.
func waitPing(ctx context.Context, u string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(ctx, u)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the server does not answer on its unix socket: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// relay serves a unix socket named like Postgres's (.s.PGSQL.<port>) in a
// temporary directory and forwards each connection to a TCP address.
type relay struct {
	dir  string
	ln   net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

func startRelay(target, port string) (*relay, error) {
	dir, err := os.MkdirTemp("", "netns-pg-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL."+port))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("relay socket: %w", err)
	}
	r := &relay{dir: dir, ln: ln}
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(c, target)
		}
	})
	return r, nil
}

func forward(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			_ = dst.Close()
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

func (r *relay) stop() {
	r.once.Do(func() {
		r.ln.Close()
		r.wg.Wait()
		os.RemoveAll(r.dir)
	})
}
