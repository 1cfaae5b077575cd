// Package deploycmd implements `alicia deploy ...`: what an operator runs
// around the repository's docker-compose.yml. InitSecrets writes the secret
// files the compose file mounts.
package deploycmd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// DefaultSecretsDir is where docker-compose.yml reads its secret files,
// relative to the repository root.
const DefaultSecretsDir = "deploy/secrets"

// The secret files of docker-compose.yml (its top-level secrets:).
const (
	PostgresPassword = "postgres_password"
	PostgresURL      = "postgres_url"
	APIKeys          = "api_keys"
	LiveKitAPIKey    = "livekit_api_key"
	LiveKitAPISecret = "livekit_api_secret"

	// The database's roles (pkg/localpg): postgres_url is the superuser's,
	// for the migrate job only. The postgres container's init script
	// (PostgresInitSQL) reads the passwords; the services the URLs.
	PostgresMigratorPassword = "postgres_migrator_password"
	PostgresMigratorURL      = "postgres_migrator_url"
	PostgresWriterPassword   = "postgres_writer_password"
	PostgresWriterURL        = "postgres_writer_url"
	PostgresReaderPassword   = "postgres_reader_password"
	PostgresReaderURL        = "postgres_reader_url"
)

// SecretNames lists every file InitSecrets manages, in the order it writes
// them: then one NATS password per user of pkg/natsauth (natsauth.SecretName).
var SecretNames = append([]string{PostgresPassword, PostgresURL,
	PostgresMigratorPassword, PostgresMigratorURL, PostgresWriterPassword, PostgresWriterURL, PostgresReaderPassword, PostgresReaderURL,
	APIKeys, LiveKitAPIKey, LiveKitAPISecret}, natsSecrets()...)

// ComposeDatabase is the compose file's database (POSTGRES_DB), whose roles
// are localpg.RolesFor(ComposeDatabase).
const ComposeDatabase = "alicia"

// credential is a Postgres user's password file and the URL file carrying it.
type credential struct{ password, url, user string }

// credentials are the superuser's first: the roles' URLs are made from its URL.
func credentials(db string) []credential {
	r := localpg.RolesFor(db)
	return []credential{
		{PostgresPassword, PostgresURL, ""}, // the user of postgres_url, alicia when made here
		{PostgresMigratorPassword, PostgresMigratorURL, r.Migrator},
		{PostgresWriterPassword, PostgresWriterURL, r.Writer},
		{PostgresReaderPassword, PostgresReaderURL, r.Reader},
	}
}

// readByPostgres are the files the postgres container reads (as uid 999).
var readByPostgres = []string{PostgresPassword, PostgresMigratorPassword, PostgresWriterPassword, PostgresReaderPassword}

// natsSecrets are the NATS users' password files, nats_password_<user>.
func natsSecrets() []string {
	var names []string
	for _, u := range natsauth.Users() {
		names = append(names, natsauth.SecretName(u.Name))
	}
	return names
}

// Readers of the secret files inside the containers. Compose bind-mounts a
// file secret as it is on the host (its uid, gid and mode options apply to
// swarm only), so each file must be readable by these uids.
const (
	ServiceUID  = 10001 // the Alicia images' user (deploy/Dockerfile)
	PostgresUID = 999   // the postgres user of the pgvector/pgvector image
)

// APIKeyUser is the user of the API key InitSecrets generates.
const APIKeyUser = "alicia"

// fileMode lets the containers' users read the files; the directory (0700)
// keeps the host's other users out.
const (
	fileMode fs.FileMode = 0o644
	dirMode  fs.FileMode = 0o700
)

// ErrMismatch is returned when a Postgres URL file does not carry the
// password of its password file (postgres_url and postgres_password, or a
// role's), or does not log in as its role.
var ErrMismatch = errors.New("a Postgres URL does not carry the user and password of its password file")

// Options of InitSecrets.
type Options struct {
	Dir  string    // DefaultSecretsDir when empty
	Rand io.Reader // crypto/rand when nil
	Out  io.Writer // what was written and kept; os.Stdout when nil
}

// InitSecrets writes every missing secret file of the compose file in
// o.Dir with strong random values: the Postgres superuser's password and
// the URL carrying it, the same for each of the database's roles (migrator,
// writer, reader; their URLs reach the server and database of
// postgres_url), an API key (user alicia), a LiveKit API key and secret.
// It never changes an existing file's content. Of a password file and its
// URL file, a missing one is made from the other, and the two must agree
// when both exist (ErrMismatch). Files the containers' users could
// not read get read permission for all, and the directory is made 0700. It reports each file, and prints a newly made
// API key, which clients need.
func InitSecrets(o Options) error {
	if o.Dir == "" {
		o.Dir = DefaultSecretsDir
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if err := ensureDir(o.Dir, o.Out); err != nil {
		return err
	}
	existing := map[string]string{}
	for _, name := range SecretNames {
		b, err := os.ReadFile(filepath.Join(o.Dir, name))
		switch {
		case err == nil:
			existing[name] = strings.TrimSpace(string(b))
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("deploy: %w", err)
		}
	}
	values, err := newValues(existing, o.Rand)
	if err != nil {
		return err
	}
	for _, name := range SecretNames {
		path := filepath.Join(o.Dir, name)
		if _, ok := existing[name]; ok {
			if err := ensureReadable(path, o.Out); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "kept   %s (exists)\n", path)
			continue
		}
		if err := writeNew(path, values[name]); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "wrote  %s (%s)\n", path, describe(name))
	}
	if _, ok := existing[APIKeys]; !ok {
		_, key, _ := strings.Cut(values[APIKeys], ":")
		fmt.Fprintf(o.Out, "\nAPI key of user %s (clients send it as the bearer token; it stays in %s):\n%s\n",
			APIKeyUser, filepath.Join(o.Dir, APIKeys), key)
	}
	return nil
}

// newValues returns the content of every missing file, consistent with the
// existing ones.
func newValues(existing map[string]string, r io.Reader) (map[string]string, error) {
	v := map[string]string{}
	random := func(n int) (string, error) {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", fmt.Errorf("deploy: random: %w", err)
		}
		return hex.EncodeToString(b), nil
	}
	base := ComposePostgresURL("")
	if u, ok := existing[PostgresURL]; ok {
		base = u
	}
	for _, c := range credentials(database(base)) {
		password, hasPassword := existing[c.password]
		rawURL, hasURL := existing[c.url]
		switch {
		case hasPassword && hasURL:
			if user, p, err := urlUser(rawURL); err != nil || p != password || (c.user != "" && user != c.user) {
				return nil, fmt.Errorf("deploy: %w: %s and %s: fix one of them (the database keeps the password it was created with)", ErrMismatch, c.password, c.url)
			}
		case hasURL:
			user, p, err := urlUser(rawURL)
			if err != nil || p == "" {
				return nil, fmt.Errorf("deploy: %s has no password to write into %s", c.url, c.password)
			}
			if c.user != "" && user != c.user {
				return nil, fmt.Errorf("deploy: %w: %s logs in as %q, not %s", ErrMismatch, c.url, user, c.user)
			}
			v[c.password] = p
		default:
			if !hasPassword {
				var err error
				if password, err = random(24); err != nil {
					return nil, err
				}
				v[c.password] = password
			}
			user := c.user
			if user == "" {
				user = "alicia"
			}
			u, err := withUser(base, user, password)
			if err != nil {
				return nil, fmt.Errorf("deploy: %s: %w", PostgresURL, err)
			}
			v[c.url] = u
			if c.url == PostgresURL {
				base = u
			}
		}
	}
	key, err := random(24)
	if err != nil {
		return nil, err
	}
	v[APIKeys] = APIKeyUser + ":" + key
	lkKey, err := random(8)
	if err != nil {
		return nil, err
	}
	v[LiveKitAPIKey] = "API" + lkKey
	if v[LiveKitAPISecret], err = random(32); err != nil {
		return nil, err
	}
	for _, name := range natsSecrets() {
		if v[name], err = random(24); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// ComposePostgresURL is the superuser's URL of the compose file's postgres
// service with password (the roles' URLs differ only in their user).
func ComposePostgresURL(password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("alicia", password), Host: "postgres:5432", Path: "/alicia", RawQuery: "sslmode=disable"}
	return u.String()
}

// withUser is base logging in as user with password.
func withUser(base, user, password string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// database is the database a Postgres URL names.
func database(raw string) string {
	if u, err := url.Parse(raw); err == nil && strings.TrimPrefix(u.Path, "/") != "" {
		return strings.TrimPrefix(u.Path, "/")
	}
	return ComposeDatabase
}

func urlUser(raw string) (user, password string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return "", "", err
	}
	p, _ := u.User.Password()
	return u.User.Username(), p, nil
}

func describe(name string) string {
	switch name {
	case PostgresPassword:
		return "Postgres password of user alicia, used when the postgres volume is first created"
	case PostgresURL:
		return "the superuser's Postgres URL with that password, for the migrate job only"
	case PostgresMigratorPassword, PostgresWriterPassword, PostgresReaderPassword:
		return "Postgres password of role " + roleOf(name) + ", set by the migrate job"
	case PostgresMigratorURL:
		return "Postgres URL of role " + roleOf(name) + ": the migrations"
	case PostgresWriterURL:
		return "Postgres URL of role " + roleOf(name) + ": persistence"
	case PostgresReaderURL:
		return "Postgres URL of role " + roleOf(name) + ": gateway, llm, memory (SELECT only)"
	case APIKeys:
		return "API key of user " + APIKeyUser
	case LiveKitAPIKey:
		return "LiveKit API key name"
	case LiveKitAPISecret:
		return "LiveKit API secret, 64 hex characters"
	}
	for _, u := range natsauth.Users() {
		if name == natsauth.SecretName(u.Name) {
			return "NATS password of user " + u.Name + " (deploy/nats.conf)"
		}
	}
	return name
}

func roleOf(name string) string {
	for _, c := range credentials(ComposeDatabase) {
		if name == c.password || name == c.url {
			return c.user
		}
	}
	return ""
}

func ensureDir(dir string, out io.Writer) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("deploy: %w", err)
		}
		if err := os.Mkdir(dir, dirMode); err != nil {
			return fmt.Errorf("deploy: %w", err)
		}
		fmt.Fprintf(out, "made   %s/ (mode %04o: only its owner lists or opens it on this host)\n", dir, dirMode)
		return os.Chmod(dir, dirMode) // Mkdir's mode is subject to the umask
	}
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("deploy: %s is not a directory", dir)
	}
	// The files are readable by all (for the containers' users): the
	// directory keeps the host's other users out. Docker creates a missing
	// bind-mount source 0755 (docker compose run init-secrets).
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		if err := os.Chmod(dir, dirMode); err != nil {
			return fmt.Errorf("deploy: %s is mode %04o, open to other users, and cannot be closed: %w", dir, mode, err)
		}
		fmt.Fprintf(out, "chmod  %s/ %04o -> %04o (only its owner lists or opens it on this host)\n", dir, mode, dirMode)
	}
	return nil
}

// writeNew creates path with content; it fails rather than replace a file
// created meanwhile.
func writeNew(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	_, err = f.WriteString(content + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(path, fileMode) // the umask may have taken bits away
	}
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	return nil
}

// ensureReadable adds read permission for all to a file the containers'
// users could not otherwise read (not world-readable, not owned by them).
func ensureReadable(path string, out io.Writer) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	mode := fi.Mode().Perm()
	if mode&0o004 != 0 {
		return nil
	}
	reader := ServiceUID
	if slices.Contains(readByPostgres, filepath.Base(path)) {
		reader = PostgresUID
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == reader && mode&0o400 != 0 {
		return nil
	}
	if err := os.Chmod(path, mode|0o444); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	fmt.Fprintf(out, "chmod  %s %04o -> %04o (uid %d in the containers must read it)\n", path, mode, mode|0o444, reader)
	return nil
}
