// Package opnats connects the alicia command's bus tools (replay, backup,
// restore) to NATS as the operator: the admin user, whose credentials they
// find themselves where they can.
//
// In order: ALICIA_NATS_USER and ALICIA_NATS_PASSWORD(_FILE), or the
// user:password@ of ALICIA_NATS_URL; else the admin's URL that `alicia up`
// wrote into its data directory (ALICIA_DATA_DIR/nats-admin-url, mode 0600,
// readable by the user who ran up), when it names a server of
// ALICIA_NATS_URL (default nats://127.0.0.1:4222). A server that refuses the
// connection gets one sentence naming the credential to give.
package opnats

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
)

// AdminURLFile is where `alicia up` writes the NATS URL of the admin user
// (every permission) in its data directory, mode 0600.
const AdminURLFile = "nats-admin-url"

// DefaultURL is the NATS of `alicia up` with its defaults.
const DefaultURL = "nats://127.0.0.1:4222"

// DefaultDataDir is ALICIA_DATA_DIR's default: ~/.local/share/alicia.
func DefaultDataDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".local", "share", "alicia")
}

// Config is where NATS is and who to be there.
type Config struct {
	// URL is ALICIA_NATS_URL: one server or several, comma-separated.
	URL string
	// Auth is ALICIA_NATS_USER and ALICIA_NATS_PASSWORD(_FILE).
	Auth bus.Credentials
	// DataDir is ALICIA_DATA_DIR, where `alicia up` wrote AdminURLFile.
	DataDir string
}

// From reads ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD(_FILE)
// and ALICIA_DATA_DIR from src.
func From(src config.Source) (Config, error) {
	c := Config{URL: DefaultURL}
	src.String("ALICIA_NATS_URL", &c.URL)
	src.String("ALICIA_DATA_DIR", &c.DataDir)
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	return c, c.Auth.From(src)
}

// FromEnv is From the process environment: the command's only source.
func FromEnv() (Config, error) { return From(config.Environ()) }

// Connect connects as the operator; name names the connection
// ("alicia-<name>") and the command in messages.
func (c Config) Connect(name string) (*nats.Conn, error) {
	target, source, fromUp := c.URL, "", false // source: where the credentials came from
	switch {
	case c.Auth.User != "":
		source = "ALICIA_NATS_USER " + c.Auth.User
	case hasUserInfo(c.URL):
		source = "the user of ALICIA_NATS_URL"
	default:
		if admin, ok := c.adminURL(); ok {
			target, source, fromUp = admin, filepath.Join(c.DataDir, AdminURLFile), true
		}
	}
	nc, err := nats.Connect(target, nats.Name("alicia-"+name), c.Auth.Option())
	if err == nil {
		return nc, nil
	}
	shown := redact(c.URL)
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		if fromUp && errors.Is(err, nats.ErrNoServers) {
			return nil, fmt.Errorf("connect to NATS at %s: %w (is `alicia up` running?)", shown, err)
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, err)
	}
	hint := fmt.Sprintf("`alicia %s` reads the streams as the NATS admin user: set ALICIA_NATS_USER=admin and ALICIA_NATS_PASSWORD_FILE to its password file "+
		"(docker compose: deploy/secrets/nats_password_admin), or run it as the user whose `alicia up` wrote %s",
		name, filepath.Join(c.DataDir, AdminURLFile))
	if source == "" {
		return nil, fmt.Errorf("NATS at %s refused a connection without credentials: %s", shown, hint)
	}
	return nil, fmt.Errorf("NATS at %s refused the credentials of %s: %s", shown, source, hint)
}

// adminURL is the URL in DataDir/AdminURLFile when it names a server of
// c.URL (up's own NATS, not another one's).
func (c Config) adminURL() (string, bool) {
	b, err := os.ReadFile(filepath.Join(c.DataDir, AdminURLFile))
	if err != nil {
		return "", false
	}
	admin := strings.TrimSpace(string(b))
	au, err := url.Parse(admin)
	if err != nil || au.User == nil {
		return "", false
	}
	for _, s := range strings.Split(c.URL, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err == nil && sameServer(u, au) {
			return admin, true
		}
	}
	return "", false
}

// sameServer reports whether a and b name one host and port (4222 when
// none is given).
func sameServer(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		return "4222"
	}
	host := func(u *url.URL) string {
		if h := u.Hostname(); h != "localhost" {
			return h
		}
		return "127.0.0.1"
	}
	return host(a) == host(b) && port(a) == port(b)
}

func hasUserInfo(urls string) bool {
	for _, s := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// redact is urls without passwords.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, s := range parts {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
