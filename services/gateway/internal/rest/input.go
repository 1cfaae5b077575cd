package rest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Input limits (API.md).
const (
	maxIDLen       = 128
	maxTitle       = 200
	maxTags        = 20
	maxTag         = 50
	maxQuick       = 200
	maxQuery       = 1000
	defaultLimit   = 50
	maxLimit       = 200
	defaultSearchK = 10
	maxSearchK     = 50
)

// bindJSON decodes the request body into v, strictly: unknown fields, a
// second value or a wrong type are a 400 naming the problem. An empty body
// is allowed when emptyOK.
func bindJSON(c echo.Context, v any, emptyOK bool) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			if emptyOK {
				return nil
			}
			return fail(http.StatusBadRequest, "a JSON body is required")
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fail(http.StatusRequestEntityTooLarge, "body larger than %d bytes", tooBig.Limit)
		}
		return fail(http.StatusBadRequest, "invalid JSON body: %s", err.Error())
	}
	if dec.More() {
		return fail(http.StatusBadRequest, "invalid JSON body: more than one value")
	}
	return nil
}

// pathID returns a path parameter that can be an id (and a subject token).
func pathID(c echo.Context, name string) (string, error) {
	id := c.Param(name)
	if len(id) > maxIDLen || !subjects.ValidToken(id) || !utf8.ValidString(id) {
		return "", fail(http.StatusBadRequest, "%s %q is not a valid id", name, id)
	}
	return id, nil
}

// limitParam reads ?limit= within 1..hi, def when absent.
func limitParam(c echo.Context, def, hi int) (int, error) {
	s := c.QueryParam("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > hi {
		return 0, fail(http.StatusBadRequest, "limit must be a whole number from 1 to %d", hi)
	}
	return n, nil
}

// text checks a text field: valid UTF-8, at most max characters, and not
// empty when required.
func text(field, s string, max int, required bool) error {
	switch {
	case !utf8.ValidString(s):
		return fail(http.StatusBadRequest, "%s is not valid UTF-8", field)
	case required && strings.TrimSpace(s) == "":
		return fail(http.StatusBadRequest, "%s is required", field)
	case utf8.RuneCountInString(s) > max:
		return fail(http.StatusBadRequest, "%s is longer than %d characters", field, max)
	}
	return nil
}

func oneOf(field, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fail(http.StatusBadRequest, "%s %q is not one of %v", field, v, allowed)
}
