package upcmd

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/services/cli/internal/opnats"
)

// AdminURLFile is where up writes the NATS URL of the admin user (every
// permission) in its data directory, mode 0600, for the operator's own
// tools: `alicia replay`, `alicia backup` find it there (pkg opnats).
const AdminURLFile = opnats.AdminURLFile

// natsUsers are the users of up's NATS server, with passwords made afresh at
// each start: one per service (pkg/natsauth) and the admin.
type natsUsers struct {
	server []natsserver.User
	creds  map[string]bus.Credentials
}

func newNATSUsers() natsUsers {
	u := natsUsers{creds: map[string]bus.Credentials{}}
	for _, user := range natsauth.Users() {
		c := bus.Credentials{User: user.Name, Password: randomHex(16)}
		u.creds[user.Name] = c
		u.server = append(u.server, natsserver.User{Name: c.User, Password: c.Password, Permissions: user.Permissions})
	}
	return u
}

// of returns service's credentials.
func (u natsUsers) of(service string) bus.Credentials { return u.creds[service] }

// url is natsURL with service's user and password: how the services up runs
// in its process log in (bus.Connect; nats.go reads the userinfo).
func (u natsUsers) url(natsURL, service string) (string, error) {
	pu, err := url.Parse(natsURL)
	if err != nil {
		return "", fmt.Errorf("nats URL: %w", err)
	}
	c := u.of(service)
	pu.User = url.UserPassword(c.User, c.Password)
	return pu.String(), nil
}

// writeAdminURL writes the admin's URL to dataDir/AdminURLFile and returns the file's path.
func (u natsUsers) writeAdminURL(natsURL, dataDir string) (string, error) {
	admin, err := u.url(natsURL, natsauth.Admin)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, AdminURLFile)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	// Replaced, not rewritten in place: the mode of a new file is ours.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(admin+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}
