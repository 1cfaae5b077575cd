// Package auth checks API keys at the gateway: each key maps to a user, keys
// come from ALICIA_API_KEYS, and requests carry them as "Authorization:
// Bearer <key>" or, for WebSockets (browsers cannot set headers there), a
// "token" query parameter.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// Key is an API key and the user it acts for.
type Key struct {
	User   string
	Secret string
}

// ParseKeys reads "key1,key2" or "user1:key1,user2:key2". A key without a
// user acts for a user derived from the key's hash, so the same key always
// owns the same conversations.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		user, secret, ok := strings.Cut(part, ":")
		if !ok {
			secret, user = part, ""
		}
		if len(secret) < 16 {
			return nil, fmt.Errorf("auth: an API key must be at least 16 characters (got %d)", len(secret))
		}
		if user == "" {
			sum := sha256.Sum256([]byte(secret))
			user = "key-" + hex.EncodeToString(sum[:6])
		}
		keys = append(keys, Key{User: user, Secret: secret})
	}
	if len(keys) == 0 {
		return nil, errors.New("auth: no API keys configured")
	}
	return keys, nil
}

// Keys verifies presented keys in constant time.
type Keys struct{ keys []Key }

// NewKeys returns a verifier.
func NewKeys(keys []Key) *Keys { return &Keys{keys: keys} }

// User returns the user of secret, or false.
func (k *Keys) User(secret string) (string, bool) {
	user, found := "", 0
	for _, key := range k.keys {
		if subtle.ConstantTimeCompare([]byte(key.Secret), []byte(secret)) == 1 {
			user, found = key.User, 1
		}
	}
	return user, found == 1
}

const userKey = "alicia.user"

// Middleware rejects requests without a valid key (401) and stores the user.
func (k *Keys) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			secret := ""
			if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
				if s, ok := strings.CutPrefix(h, "Bearer "); ok {
					secret = strings.TrimSpace(s)
				}
			} else {
				secret = c.QueryParam("token")
			}
			user, ok := k.User(secret)
			if secret == "" || !ok {
				return echo.NewHTTPError(http.StatusUnauthorized, "missing or invalid API key")
			}
			c.Set(userKey, user)
			return next(c)
		}
	}
}

// UserOf returns the authenticated user of a request that passed Middleware.
func UserOf(c echo.Context) string {
	u, _ := c.Get(userKey).(string)
	return u
}
