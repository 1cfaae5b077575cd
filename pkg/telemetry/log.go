package telemetry

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// NewLogger returns the service's root logger: JSON on stderr, or a console
// writer when ALICIA_LOG_FORMAT=console; level from ALICIA_LOG_LEVEL (default info).
func NewLogger(service string) zerolog.Logger {
	var w io.Writer = os.Stderr
	if os.Getenv("ALICIA_LOG_FORMAT") == "console" {
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}
	}
	level, err := zerolog.ParseLevel(os.Getenv("ALICIA_LOG_LEVEL"))
	if err != nil || os.Getenv("ALICIA_LOG_LEVEL") == "" {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("service", service).Logger()
}

// ForConversation derives the child logger of one conversation.
func ForConversation(l zerolog.Logger, conversationID string) zerolog.Logger {
	return l.With().Str("conversation_id", conversationID).Logger()
}
