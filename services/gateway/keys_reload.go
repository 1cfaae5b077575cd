package gateway

import (
	"bytes"
	"context"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// keysPollInterval is how often the API keys' and administrators' files
// are read: a removed key stops working, and what it opened closes,
// within a second.
const keysPollInterval = 500 * time.Millisecond

// keysSettle: a file seen changed is read again this much later and
// applied only when it reads the same, so a file caught half-written is
// not taken for one without the keys it had not written yet.
const keysSettle = 100 * time.Millisecond

// keysReloader reads ALICIA_API_KEYS_FILE and ALICIA_ADMIN_USERS_FILE again
// when they change, as the certificate reloader (tls.go) does the
// certificate: the keys and administrators of the verifier are replaced,
// and the keys no longer configured are handed to removed, which ends
// what they opened. A file that cannot be read or does not parse leaves
// the keys in force as they were (logged once per change): a mistake in
// it never locks everyone out. Each replica reads its own copy of the
// file; they must share it (a mounted Secret) to agree.
type keysReloader struct {
	keysFile, adminsFile string
	verifier             *auth.Keys
	removed              func(context.Context, []auth.KeyRef)
	log                  zerolog.Logger

	// keys and admins are the texts last read (files) or given
	// (variables), applied or not.
	keys, admins string
	// failed is the last read error logged, so it is logged once.
	failed string
}

// newKeysReloader returns the reloader of cfg's files, or nil when
// neither the keys nor the administrators come from a file.
func newKeysReloader(cfg Config, verifier *auth.Keys, removed func(context.Context, []auth.KeyRef), log zerolog.Logger) *keysReloader {
	if cfg.APIKeysFile == "" && cfg.AdminUsersFile == "" {
		return nil
	}
	return &keysReloader{keysFile: cfg.APIKeysFile, adminsFile: cfg.AdminUsersFile, verifier: verifier, removed: removed,
		log: log, keys: strings.TrimSpace(cfg.APIKeys), admins: strings.TrimSpace(cfg.AdminUsers)}
}

// run checks the files every keysPollInterval until ctx ends.
func (r *keysReloader) run(ctx context.Context) {
	tick := time.NewTicker(keysPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.check(ctx)
		}
	}
}

// read returns the keys' and administrators' texts: a file's content
// (trimmed, as config.Secret reads it), or what the variable gave.
func (r *keysReloader) read() (keys, admins string, err error) {
	keys, admins = r.keys, r.admins
	for _, f := range []struct {
		path string
		dst  *string
	}{{r.keysFile, &keys}, {r.adminsFile, &admins}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", "", err
		}
		*f.dst = string(bytes.TrimSpace(b))
	}
	return keys, admins, nil
}

// check applies the files when they changed since they were last read.
func (r *keysReloader) check(ctx context.Context) {
	keys, admins, err := r.read()
	if err != nil {
		if err.Error() != r.failed {
			r.failed = err.Error()
			r.log.Error().Err(err).Msg("cannot read the API keys or administrators file; the keys in force stay until it can be read")
		}
		return
	}
	r.failed = ""
	if keys == r.keys && admins == r.admins {
		return
	}
	t := time.NewTimer(keysSettle)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	if k, a, err := r.read(); err != nil || k != keys || a != admins {
		return // still being written: the next check sees it done
	}
	r.keys, r.admins = keys, admins
	if err := r.apply(ctx, keys, admins); err != nil {
		r.log.Error().Err(err).Str("file", r.keysFile).
			Msg("the API keys file does not parse; the keys in force stay until it is corrected")
	}
}

// apply makes keys and admins the verifier's and ends what the keys no
// longer configured opened.
func (r *keysReloader) apply(ctx context.Context, keys, admins string) error {
	parsed, err := auth.ParseKeys(keys)
	if err != nil {
		return err
	}
	adminSet, unknown := auth.ParseAdmins(admins, parsed)
	if len(unknown) > 0 {
		r.log.Warn().Strs("users", unknown).Msg("ALICIA_ADMIN_USERS names users of no API key; they are not administrators")
	}
	removed := r.verifier.Replace(parsed, adminSet)
	users := make([]string, 0, len(removed))
	for _, k := range removed {
		users = append(users, k.User)
	}
	r.log.Info().Int("keys", len(parsed)).Int("administrators", len(adminSet)).Strs("removed_key_users", users).
		Msg("API keys and administrators read again")
	if len(removed) > 0 {
		r.removed(ctx, removed)
	}
	return nil
}
