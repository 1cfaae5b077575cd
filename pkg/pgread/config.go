package pgread

import (
	"errors"

	"github.com/alicia-voice/alicia/pkg/config"
)

// Postgres is the database setting of the services that use one (gateway,
// llm, memory, persistence), embedded in their Configs as svcmain.Bus is:
// cfg.PostgresURL.
type Postgres struct {
	PostgresURL string // ALICIA_POSTGRES_URL (+ _FILE), required
}

// From overrides p from src.
func (p *Postgres) From(src config.Source) error {
	return src.Secret("ALICIA_POSTGRES_URL", &p.PostgresURL)
}

// Validate reports what is wrong with p.
func (p Postgres) Validate() error {
	if p.PostgresURL == "" {
		return errors.New("Postgres URL is empty (ALICIA_POSTGRES_URL)")
	}
	return nil
}
