module github.com/alicia-voice/alicia/services/persistence

go 1.26

require (
	github.com/alicia-voice/alicia/migrations v0.0.0-00010101000000-000000000000
	github.com/alicia-voice/alicia/pkg v0.0.0-00010101000000-000000000000
	github.com/alicia-voice/alicia/proto-schemas v0.0.0-00010101000000-000000000000
)
