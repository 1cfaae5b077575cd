// Package auth checks API keys at the gateway: each key maps to a user, keys
// come from ALICIA_API_KEYS, and requests carry them as "Authorization:
// Bearer <key>" or, on the WebSocket route only (browsers cannot set headers
// there), a "token" query parameter. Users named in ALICIA_ADMIN_USERS are
// administrators; failed authentications are throttled per client address.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
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

// ParseAdmins reads ALICIA_ADMIN_USERS: comma-separated user names. It also
// returns the names that are the user of no key (a typo, most likely: the
// caller warns), which are left out.
func ParseAdmins(s string, keys []Key) (admins map[string]bool, unknown []string) {
	admins = map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			continue
		}
		if !slices.ContainsFunc(keys, func(k Key) bool { return k.User == name }) {
			unknown = append(unknown, name)
			continue
		}
		admins[name] = true
	}
	return admins, unknown
}

// Keys verifies presented keys in constant time.
type Keys struct {
	keys   []Key
	admins map[string]bool
	// QueryTokenPath is the one route (an echo path, "/v1/ws") where the key
	// may come as ?token=; empty: nowhere.
	QueryTokenPath string
	// Failures throttles failed authentications per client address; nil:
	// not throttled.
	Failures *FailureLimiter
}

// NewKeys returns a verifier; admins are the administrators' user names.
func NewKeys(keys []Key, admins map[string]bool) *Keys {
	return &Keys{keys: keys, admins: admins}
}

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

const (
	userKey  = "alicia.user"
	adminKey = "alicia.admin"
)

// Middleware rejects requests without a valid key (401) and stores the user
// and whether it is an administrator. An address whose failures have used
// up its budget gets 429 with Retry-After before its key is even looked at,
// so guessing keys from one address is slow; successful requests never use
// the budget.
func (k *Keys) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			addr := c.RealIP()
			if k.Failures != nil {
				if wait, ok := k.Failures.Blocked(addr); !ok {
					return tooMany(c, wait)
				}
			}
			secret, problem := k.presented(c)
			user, ok := "", false
			if problem == "" {
				if user, ok = k.User(secret); !ok || secret == "" {
					problem = "missing or invalid API key"
				}
			}
			if problem != "" {
				if k.Failures != nil {
					k.Failures.Fail(addr)
				}
				return echo.NewHTTPError(http.StatusUnauthorized, problem)
			}
			c.Set(userKey, user)
			c.Set(adminKey, k.admins[user])
			return next(c)
		}
	}
}

// presented is the key the request carries, or why it is not acceptable.
func (k *Keys) presented(c echo.Context) (secret, problem string) {
	if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
		s, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return "", "missing or invalid API key"
		}
		return strings.TrimSpace(s), ""
	}
	if !c.QueryParams().Has("token") {
		return "", "missing or invalid API key"
	}
	if k.QueryTokenPath == "" || c.Path() != k.QueryTokenPath {
		return "", "the token query parameter is only accepted on /v1/ws; send the key as Authorization: Bearer <key>"
	}
	return c.QueryParam("token"), ""
}

func tooMany(c echo.Context, wait int) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(wait))
	return echo.NewHTTPError(http.StatusTooManyRequests, "too many failed authentications from this address; retry later")
}

// UserOf returns the authenticated user of a request that passed Middleware.
func UserOf(c echo.Context) string {
	u, _ := c.Get(userKey).(string)
	return u
}

// IsAdmin reports whether the request's user is an administrator.
func IsAdmin(c echo.Context) bool {
	a, _ := c.Get(adminKey).(bool)
	return a
}

// RequireAdmin answers 403 to a user who is not an administrator.
func RequireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !IsAdmin(c) {
			return echo.NewHTTPError(http.StatusForbidden,
				"only administrators may change the installation's tools and MCP servers (ALICIA_ADMIN_USERS)")
		}
		return next(c)
	}
}
