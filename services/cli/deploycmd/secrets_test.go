package deploycmd_test

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/services/cli/deploycmd"
)

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, name := range deploycmd.SecretNames {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = string(b)
	}
	return got
}

func initSecrets(t *testing.T, dir string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := deploycmd.InitSecrets(deploycmd.Options{Dir: dir, Out: &out})
	return out.String(), err
}

func TestInitSecretsFresh(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deploy", "secrets")
	out, err := initSecrets(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("secrets directory: %v, %v; want mode 0700", fi, err)
	}
	got := readAll(t, dir)
	for _, name := range deploycmd.SecretNames {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, %v; want 0644 (read by uid %d and %d in the containers)", name, fi.Mode().Perm(), err, deploycmd.ServiceUID, deploycmd.PostgresUID)
		}
		if !strings.HasSuffix(got[name], "\n") || strings.Count(got[name], "\n") != 1 {
			t.Errorf("%s: %q is not one line", name, got[name])
		}
		if !strings.Contains(out, "wrote  "+filepath.Join(dir, name)) {
			t.Errorf("output does not say %s was written:\n%s", name, out)
		}
	}
	password := strings.TrimSpace(got[deploycmd.PostgresPassword])
	if len(password) < 32 {
		t.Errorf("Postgres password %q: want at least 32 characters", password)
	}
	u, err := url.Parse(strings.TrimSpace(got[deploycmd.PostgresURL]))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := u.User.Password(); p != password || u.User.Username() != "alicia" || u.Host != "postgres:5432" || u.Path != "/alicia" {
		t.Errorf("Postgres URL %s does not reach the compose postgres as alicia with the password", u.Redacted())
	}
	user, key, ok := strings.Cut(strings.TrimSpace(got[deploycmd.APIKeys]), ":")
	if !ok || user != deploycmd.APIKeyUser || len(key) < 32 || strings.ContainsAny(key, ",: ") {
		t.Errorf("api_keys %q: want %s:<at least 32 characters>", got[deploycmd.APIKeys], deploycmd.APIKeyUser)
	}
	if !strings.Contains(out, "\n"+key+"\n") {
		t.Errorf("the new API key is not printed:\n%s", out)
	}
	if k := strings.TrimSpace(got[deploycmd.LiveKitAPIKey]); !strings.HasPrefix(k, "API") || len(k) < 12 {
		t.Errorf("LiveKit API key %q", k)
	}
	if s := strings.TrimSpace(got[deploycmd.LiveKitAPISecret]); len(s) < 32 {
		t.Errorf("LiveKit API secret %q: LiveKit wants at least 32 characters", s)
	}

	// A second deployment gets other values.
	other := filepath.Join(t.TempDir(), "secrets")
	if _, err := initSecrets(t, other); err != nil {
		t.Fatal(err)
	}
	for name, v := range readAll(t, other) {
		if v == got[name] {
			t.Errorf("%s is the same in two deployments: %q", name, v)
		}
	}
}

func TestInitSecretsKeepsExisting(t *testing.T) {
	dir := t.TempDir()
	if _, err := initSecrets(t, dir); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, dir)
	out, err := initSecrets(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if after := readAll(t, dir); len(after) != len(before) {
		t.Fatal("files lost")
	} else {
		for name := range before {
			if after[name] != before[name] {
				t.Errorf("%s changed on the second run", name)
			}
		}
	}
	if strings.Contains(out, "wrote") || strings.Count(out, "kept ") != len(deploycmd.SecretNames) || strings.Contains(out, "API key of user") {
		t.Errorf("second run output:\n%s", out)
	}
}

func TestInitSecretsPartial(t *testing.T) {
	write := func(t *testing.T, dir, name, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("password only", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, deploycmd.PostgresPassword, "operator-chosen-password\n", 0o644)
		if _, err := initSecrets(t, dir); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, dir)[deploycmd.PostgresURL]; got != deploycmd.ComposePostgresURL("operator-chosen-password")+"\n" {
			t.Fatalf("postgres_url %q does not carry the existing password", got)
		}
	})
	t.Run("url only", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, deploycmd.PostgresURL, "postgres://alicia:from-the-url@db.internal:5432/alicia\n", 0o644)
		if _, err := initSecrets(t, dir); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, dir)[deploycmd.PostgresPassword]; got != "from-the-url\n" {
			t.Fatalf("postgres_password %q is not the URL's", got)
		}
	})
	t.Run("mismatch", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, deploycmd.PostgresPassword, "one\n", 0o644)
		write(t, dir, deploycmd.PostgresURL, deploycmd.ComposePostgresURL("other")+"\n", 0o644)
		if _, err := initSecrets(t, dir); !errors.Is(err, deploycmd.ErrMismatch) {
			t.Fatalf("err = %v, want ErrMismatch", err)
		}
		if _, err := os.Stat(filepath.Join(dir, deploycmd.APIKeys)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("wrote files despite the mismatch: %v", err)
		}
	})
	t.Run("unreadable by the containers", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, deploycmd.APIKeys, "ops:0123456789abcdef0123\n", 0o600)
		out, err := initSecrets(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, deploycmd.APIKeys))
		if err != nil || fi.Mode().Perm() != 0o644 || !strings.Contains(out, "chmod") {
			t.Fatalf("api_keys mode %v, %v; output:\n%s", fi.Mode().Perm(), err, out)
		}
		if got := readAll(t, dir)[deploycmd.APIKeys]; got != "ops:0123456789abcdef0123\n" {
			t.Fatalf("api_keys content changed: %q", got)
		}
	})
}

// Docker creates a missing bind-mount source 0755: the secrets in it would
// be open to every user of the host.
func TestInitSecretsClosesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := initSecrets(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 || !strings.Contains(out, "0755 -> 0700") {
		t.Fatalf("directory mode %v, %v; output:\n%s", fi.Mode().Perm(), err, out)
	}
}

func TestInitSecretsNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := initSecrets(t, f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("err = %v", err)
	}
}

// The roles' URLs log in as their role with their password file's
// password, on the server and database of postgres_url.
func TestInitSecretsRoles(t *testing.T) {
	roles := localpg.RolesFor(deploycmd.ComposeDatabase)
	pairs := []struct{ password, url, user string }{
		{deploycmd.PostgresMigratorPassword, deploycmd.PostgresMigratorURL, roles.Migrator},
		{deploycmd.PostgresWriterPassword, deploycmd.PostgresWriterURL, roles.Writer},
		{deploycmd.PostgresReaderPassword, deploycmd.PostgresReaderURL, roles.Reader},
	}
	check := func(t *testing.T, got map[string]string, host string) {
		t.Helper()
		seen := map[string]bool{strings.TrimSpace(got[deploycmd.PostgresPassword]): true}
		for _, p := range pairs {
			password := strings.TrimSpace(got[p.password])
			u, err := url.Parse(strings.TrimSpace(got[p.url]))
			if err != nil {
				t.Fatal(err)
			}
			if pw, _ := u.User.Password(); pw != password || u.User.Username() != p.user || u.Host != host || u.Path != "/alicia" || u.Query().Get("sslmode") != "disable" {
				t.Errorf("%s = %s; want user %s, the password of %s, host %s, database alicia", p.url, u.Redacted(), p.user, p.password, host)
			}
			if len(password) < 32 || seen[password] {
				t.Errorf("%s: %d characters or shared with another user", p.password, len(password))
			}
			seen[password] = true
		}
	}
	t.Run("fresh", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := initSecrets(t, dir); err != nil {
			t.Fatal(err)
		}
		check(t, readAll(t, dir), "postgres:5432")
	})
	t.Run("an existing deployment's superuser URL", func(t *testing.T) {
		dir := t.TempDir()
		super := "postgres://alicia:kept@db.internal:5433/alicia?sslmode=disable"
		if err := os.WriteFile(filepath.Join(dir, deploycmd.PostgresURL), []byte(super+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := initSecrets(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, dir)
		if got[deploycmd.PostgresURL] != super+"\n" || got[deploycmd.PostgresPassword] != "kept\n" {
			t.Fatalf("superuser's files: %q, %q", got[deploycmd.PostgresURL], got[deploycmd.PostgresPassword])
		}
		check(t, got, "db.internal:5433")
		if !strings.Contains(out, "wrote  "+filepath.Join(dir, deploycmd.PostgresReaderURL)) {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("password only", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, deploycmd.PostgresWriterPassword), []byte("writer-chosen-password-0123456789\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := initSecrets(t, dir); err != nil {
			t.Fatal(err)
		}
		got := readAll(t, dir)
		check(t, got, "postgres:5432")
		if got[deploycmd.PostgresWriterPassword] != "writer-chosen-password-0123456789\n" {
			t.Fatal("the existing password changed")
		}
	})
	for _, tc := range []struct{ name, url string }{
		{"another password", "postgres://" + roles.Reader + ":other@postgres:5432/alicia"},
		{"another user", "postgres://alicia:same@postgres:5432/alicia"},
	} {
		t.Run("mismatch: "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range map[string]string{deploycmd.PostgresReaderPassword: "same", deploycmd.PostgresReaderURL: tc.url} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := initSecrets(t, dir); !errors.Is(err, deploycmd.ErrMismatch) {
				t.Fatalf("err = %v, want ErrMismatch", err)
			}
		})
	}
	t.Run("role URL only, as another user", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, deploycmd.PostgresWriterURL), []byte("postgres://alicia:x@postgres:5432/alicia\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := initSecrets(t, dir); !errors.Is(err, deploycmd.ErrMismatch) {
			t.Fatalf("err = %v, want ErrMismatch", err)
		}
	})
}
