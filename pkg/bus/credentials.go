package bus

import (
	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/config"
)

// Credentials are a service's NATS user and password (pkg/natsauth has the
// users and what each may do). Empty, the connection uses the URL's
// userinfo (nats://user:password@host:4222) if it has one, else none: a
// server without users (the tests') accepts it.
type Credentials struct {
	User     string // ALICIA_NATS_USER
	Password string // ALICIA_NATS_PASSWORD or ALICIA_NATS_PASSWORD_FILE
}

// From overrides c from src's ALICIA_NATS_USER and ALICIA_NATS_PASSWORD
// (or the file ALICIA_NATS_PASSWORD_FILE names).
func (c *Credentials) From(src config.Source) error {
	src.String("ALICIA_NATS_USER", &c.User)
	return src.Secret("ALICIA_NATS_PASSWORD", &c.Password)
}

// Option is the connection option that logs in with c; a no-op when c.User
// is empty.
func (c Credentials) Option() nats.Option {
	if c.User == "" {
		return func(*nats.Options) error { return nil }
	}
	return nats.UserInfo(c.User, c.Password)
}
