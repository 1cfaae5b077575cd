package telemetry

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/rs/zerolog"
)

// Log formats (ALICIA_LOG_FORMAT).
const (
	// LogConsole is human-readable lines, coloured only on a terminal.
	LogConsole = "console"
	// LogJSON is one JSON object per line, for log collectors.
	LogJSON = "json"
)

// LogConfig is how a process logs: ALICIA_LOG_FORMAT and ALICIA_LOG_LEVEL.
type LogConfig struct {
	Format string        // LogConsole (default) or LogJSON
	Level  zerolog.Level // default info
}

// LogConfigFromEnv is LogConfigFrom(config.Environ()).
func LogConfigFromEnv() (LogConfig, error) { return LogConfigFrom(config.Environ()) }

// LogConfigFrom reads ALICIA_LOG_FORMAT and ALICIA_LOG_LEVEL from src. An
// unknown value is an error naming the variable, like every other setting;
// the returned config then holds the defaults for what was wrong, so the
// error itself can still be logged.
func LogConfigFrom(src config.Source) (LogConfig, error) {
	c := LogConfig{Format: LogConsole, Level: zerolog.InfoLevel}
	var errs []string
	switch f := strings.ToLower(strings.TrimSpace(src.Get("ALICIA_LOG_FORMAT"))); f {
	case "":
	case LogConsole, LogJSON:
		c.Format = f
	default:
		errs = append(errs, fmt.Sprintf("ALICIA_LOG_FORMAT %q is neither %s nor %s", f, LogConsole, LogJSON))
	}
	if v := strings.TrimSpace(src.Get("ALICIA_LOG_LEVEL")); v != "" {
		l, err := zerolog.ParseLevel(strings.ToLower(v))
		if err != nil || l == zerolog.NoLevel {
			errs = append(errs, fmt.Sprintf("ALICIA_LOG_LEVEL %q is not one of trace, debug, info, warn, error, fatal, panic, disabled", v))
		} else {
			c.Level = l
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return c, nil
}

// Logger returns a root logger writing to w in c's format and level, with
// a timestamp on every line. Console output is coloured only when w is a
// terminal, so a file or a pipe gets no escape codes.
func (c LogConfig) Logger(w io.Writer) zerolog.Logger {
	if c.Format != LogJSON {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)}
	}
	return zerolog.New(w).Level(c.Level).With().Timestamp().Logger()
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && f.Name() != os.DevNull
}

// NewLogger returns a service's root logger on stderr as c says, with the
// service's name on every line.
func NewLogger(service string, c LogConfig) zerolog.Logger {
	return c.Logger(os.Stderr).With().Str("service", service).Logger()
}

// ForConversation derives the child logger of one conversation.
func ForConversation(l zerolog.Logger, conversationID string) zerolog.Logger {
	return l.With().Str("conversation_id", conversationID).Logger()
}
