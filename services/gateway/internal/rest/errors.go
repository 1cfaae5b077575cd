package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// fail returns an error echo answers with status and message.
func fail(status int, format string, args ...any) error {
	return echo.NewHTTPError(status, fmt.Sprintf(format, args...))
}

// ErrorHandler answers every error of the server in the API's JSON shape
// (echo's own 404/405/413, auth's 401 and the rate limiter's 429 included).
// Errors that are not HTTP errors are logged and answered 500.
func ErrorHandler(log zerolog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		status, msg := http.StatusInternalServerError, "internal error"
		var he *echo.HTTPError
		if errors.As(err, &he) {
			status = he.Code
			if m, ok := he.Message.(string); ok {
				msg = m
			} else {
				msg = http.StatusText(status)
			}
		} else {
			log.Error().Err(err).Str("method", c.Request().Method).Str("path", c.Path()).Msg("request failed")
		}
		if c.Request().Method == http.MethodHead {
			err = c.NoContent(status)
		} else {
			var body restapi.Error
			body.Error.Code, body.Error.Message = status, msg
			err = c.JSON(status, body)
		}
		if err != nil {
			log.Debug().Err(err).Msg("write error answer")
		}
	}
}

// lookup maps a store error to 404 / 403 naming what was looked up.
func lookup(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fail(http.StatusNotFound, "%s not found", what)
	case errors.Is(err, store.ErrForbidden):
		return fail(http.StatusForbidden, "%s belongs to another user", what)
	}
	return err
}

// dependency maps an error of a call to another service (or of waiting for
// persistence) to 503 / 504 / 404 / 400.
func dependency(err error, service string) error {
	var re *rpc.Error
	switch {
	case errors.Is(err, rpc.ErrNoResponders):
		return fail(http.StatusServiceUnavailable, "the %s service is not running", service)
	case errors.As(err, &re) && re.Code == rpc.CodeNotFound:
		return fail(http.StatusNotFound, "%s", re.Description)
	case errors.As(err, &re) && re.Code == rpc.CodeBadRequest:
		return fail(http.StatusBadRequest, "%s", re.Description)
	case errors.As(err, &re) && re.Code == rpc.CodeUnavailable:
		return fail(http.StatusServiceUnavailable, "%s: %s", service, re.Description)
	case errors.As(err, &re) && re.Code == rpc.CodeTimeout,
		errors.Is(err, context.DeadlineExceeded):
		return fail(http.StatusGatewayTimeout, "the %s service did not answer in time; the change may still be applied", service)
	}
	return err
}
