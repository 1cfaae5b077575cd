package opnats_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/opnats"
)

// server starts an embedded NATS that, like up's, knows only its users:
// admin (password "pw-Kq7") and a service user.
func server(t *testing.T) string {
	t.Helper()
	url := "nats://" + testkit.FreeAddr(t)
	var users []natsserver.User
	for _, u := range natsauth.Users() {
		users = append(users, natsserver.User{Name: u.Name, Password: "pw-Kq7", Permissions: u.Permissions})
	}
	s, err := natsserver.Start(natsserver.Options{URL: url, StoreDir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return url
}

func writeAdminURL(t *testing.T, dir, url string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, opnats.AdminURLFile), []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConnect: the admin URL that up wrote is found and used for its own
// server only; credentials given in the environment or the URL win; a
// refusal says in one sentence which credential to give.
func TestConnect(t *testing.T) {
	url := server(t)
	host := strings.TrimPrefix(url, "nats://")
	adminURL := "nats://admin:pw-Kq7@" + host
	other := "nats://admin:pw-Kq7@" + testkit.FreeAddr(t)

	for _, c := range []struct {
		name    string
		cfg     opnats.Config
		file    string // the admin URL file's content, or none
		wantErr []string
	}{
		{name: "the admin URL up wrote", cfg: opnats.Config{URL: url}, file: adminURL},
		{name: "localhost for 127.0.0.1", cfg: opnats.Config{URL: strings.Replace(url, "127.0.0.1", "localhost", 1)}, file: adminURL},
		{name: "one of several servers", cfg: opnats.Config{URL: "nats://127.0.0.1:1," + url}, file: adminURL},
		{name: "credentials from the environment", cfg: opnats.Config{URL: url, Auth: bus.Credentials{User: "admin", Password: "pw-Kq7"}}},
		{name: "credentials in the URL", cfg: opnats.Config{URL: adminURL}},
		{name: "no credentials anywhere", cfg: opnats.Config{URL: url},
			wantErr: []string{"NATS at " + url + " refused a connection without credentials", "`alicia replay` reads the streams as the NATS admin user",
				"ALICIA_NATS_USER=admin", "ALICIA_NATS_PASSWORD_FILE", "nats_password_admin", opnats.AdminURLFile}},
		{name: "another server's admin URL is not used", cfg: opnats.Config{URL: url}, file: other,
			wantErr: []string{"refused a connection without credentials"}},
		{name: "a wrong password", cfg: opnats.Config{URL: url, Auth: bus.Credentials{User: "admin", Password: "wrong-Zx9"}}, file: adminURL,
			wantErr: []string{"refused the credentials of ALICIA_NATS_USER admin", "ALICIA_NATS_PASSWORD_FILE"}},
		{name: "a wrong password in the URL is not shown", cfg: opnats.Config{URL: "nats://admin:wrong-Zx9@" + host},
			wantErr: []string{"refused the credentials of the user of ALICIA_NATS_URL", "admin:xxxxx@"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.DataDir = t.TempDir()
			if c.file != "" {
				writeAdminURL(t, c.cfg.DataDir, c.file)
			}
			nc, err := c.cfg.Connect("replay")
			if c.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				if _, err := nc.JetStream(); err != nil {
					t.Fatal(err)
				}
				// The admin may use the JetStream API.
				if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
					t.Fatalf("JetStream API as %s: %v", c.name, err)
				}
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			for _, w := range c.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "wrong-Zx9") || strings.Contains(err.Error(), "pw-Kq7") {
				t.Errorf("error %q shows a password", err)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error %q is not one sentence on one line", err)
			}
		})
	}
}

// TestNoServer: with up's admin URL but nothing listening, the error asks
// whether up runs.
func TestNoServer(t *testing.T) {
	addr := testkit.FreeAddr(t)
	dir := t.TempDir()
	writeAdminURL(t, dir, "nats://admin:pw-Kq7@"+addr)
	_, err := opnats.Config{URL: "nats://" + addr, DataDir: dir}.Connect("replay")
	if err == nil || !strings.Contains(err.Error(), "is `alicia up` running?") || strings.Contains(err.Error(), "pw-Kq7") {
		t.Fatalf("error %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"ALICIA_NATS_URL", "ALICIA_DATA_DIR", "ALICIA_NATS_USER", "ALICIA_NATS_PASSWORD", "ALICIA_NATS_PASSWORD_FILE"} {
		t.Setenv(k, "")
	}
	c, err := opnats.FromEnv()
	if err != nil || c.URL != opnats.DefaultURL || c.DataDir != filepath.Join(home, ".local", "share", "alicia") || c.Auth.User != "" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_NATS_URL", "nats://nats-1:4222")
	t.Setenv("ALICIA_DATA_DIR", "/srv/alicia")
	t.Setenv("ALICIA_NATS_USER", "admin")
	t.Setenv("ALICIA_NATS_PASSWORD_FILE", pw)
	c, err = opnats.FromEnv()
	if err != nil || c.URL != "nats://nats-1:4222" || c.DataDir != "/srv/alicia" || c.Auth.User != "admin" || c.Auth.Password != "s3" {
		t.Fatalf("from the environment: %+v %v", c, err)
	}
}
