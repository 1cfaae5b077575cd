// Package auth checks API keys at the gateway: each key maps to a user, keys
// come from ALICIA_API_KEYS, and requests carry them as "Authorization:
// Bearer <key>" or, on the WebSocket route only, a "token" query
// parameter. A browser instead sends the session cookie it got for a key
// (POST /v1/session); with it, what changes state and WebSocket upgrades
// must come from an allowed Origin. Users named in ALICIA_ADMIN_USERS are
// administrators; wrong keys are throttled per client address and key,
// without locking anyone else out (FailureLimiter).
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// Key is an API key and the user it acts for.
type Key struct {
	User   string
	Secret string
}

// ParseKeys reads "key1,key2" or "user1:key1,user2:key2"; entries may
// also be on lines of their own (a file). A key without a user acts for a
// user derived from the key's hash, so the same key always owns the same
// conversations. Every problem is reported, each naming its entry (and
// line, when there are several) but never the key.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	var errs []error
	lines := strings.Split(s, "\n")
	for ln, line := range lines {
		for n, part := range strings.Split(line, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			user, secret, ok := strings.Cut(part, ":")
			if !ok {
				secret, user = part, ""
			}
			if len(secret) < 16 {
				where := fmt.Sprintf("entry %d", n+1)
				if len(lines) > 1 {
					where = fmt.Sprintf("line %d, %s", ln+1, where)
				}
				if user != "" {
					where += " (user " + strconv.Quote(user) + ")"
				}
				errs = append(errs, fmt.Errorf("auth: %s: an API key must be at least 16 characters (got %d)", where, len(secret)))
				continue
			}
			if user == "" {
				sum := sha256.Sum256([]byte(secret))
				user = "key-" + hex.EncodeToString(sum[:6])
			}
			keys = append(keys, Key{User: user, Secret: secret})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
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

// Keys verifies presented keys in constant time. The keys and the
// administrators may be replaced while requests are served (Replace).
type Keys struct {
	set atomic.Pointer[keySet]
	// QueryTokenPath is the one route (an echo path, "/v1/ws") where the key
	// may come as ?token=; empty: nowhere.
	QueryTokenPath string
	// Failures throttles failed authentications per client address; nil:
	// not throttled.
	Failures *FailureLimiter
	// Sessions finds the session of a cookie; nil: no cookies.
	Sessions SessionFinder
	// Origins may act with a session cookie; Cookie clears a stale one.
	Origins Origins
	Cookie  session.Cookie
	Log     zerolog.Logger
}

// keySet is one configuration of keys and administrators, never changed
// once made: a request reads one whole set.
type keySet struct {
	keys []Key
	// digests are the keys' SHA-256, in keys' order: what a presented
	// key's digest is compared with.
	digests [][sha256.Size]byte
	admins  map[string]bool
	// byFingerprint is each key's user by Fingerprint.
	byFingerprint map[string]string
}

// SessionFinder finds a browser session by the id its cookie holds
// (session.ErrNotFound when there is none).
type SessionFinder interface {
	Lookup(ctx context.Context, id string) (session.Record, error)
}

// NewKeys returns a verifier; admins are the administrators' user names.
func NewKeys(keys []Key, admins map[string]bool) *Keys {
	k := &Keys{}
	k.set.Store(newKeySet(keys, admins))
	return k
}

func newKeySet(keys []Key, admins map[string]bool) *keySet {
	s := &keySet{keys: keys, admins: admins, byFingerprint: map[string]string{}}
	for _, key := range keys {
		s.byFingerprint[Fingerprint(key.Secret)] = key.User
		s.digests = append(s.digests, sha256.Sum256([]byte(key.Secret)))
	}
	return s
}

// Fingerprint names an API key without revealing it, for a session to
// remember which key it was opened with: 128 bits of a SHA-256 of the
// key, apart from every other hash of it made here.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte("alicia session key fingerprint\x00" + secret))
	return hex.EncodeToString(sum[:16])
}

// KeyUser returns the user of the configured key with fingerprint, or false
// when no configured key has it (the key was removed).
func (k *Keys) KeyUser(fingerprint string) (string, bool) {
	u, ok := k.set.Load().byFingerprint[fingerprint]
	return u, ok
}

// IsAdminUser reports whether user is an administrator.
func (k *Keys) IsAdminUser(user string) bool { return k.set.Load().admins[user] }

// Admins are the administrators now, sorted.
func (k *Keys) Admins() []string {
	var out []string
	for u, ok := range k.set.Load().admins {
		if ok {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// User returns the user of secret, or false. The SHA-256 digests of the
// presented and every configured key are compared, all of them, in
// constant time: ConstantTimeCompare answers at once when the lengths
// differ, so comparing the keys themselves would tell a guesser their
// lengths; digests are all 32 bytes.
func (k *Keys) User(secret string) (string, bool) {
	set := k.set.Load()
	presented := sha256.Sum256([]byte(secret))
	user, found := "", 0
	for i, key := range set.keys {
		if constantTimeCompare(set.digests[i][:], presented[:]) == 1 {
			user, found = key.User, 1
		}
	}
	return user, found == 1
}

// constantTimeCompare is subtle.ConstantTimeCompare; a test sees what it
// is given.
var constantTimeCompare = subtle.ConstantTimeCompare

const (
	userKey    = "alicia.user"
	adminKey   = "alicia.admin"
	sessionKey = "alicia.session"
	apiKeyKey  = "alicia.key"
)

// Middleware rejects requests without a valid key or session (401) and
// stores the user and whether it is an administrator. A request that
// carries a key (Authorization, or ?token= on a WebSocket upgrade) is
// judged by it alone (Authenticate); otherwise the session cookie, if
// any, authenticates it (withSession). A request with neither, or with a
// credential where none is read, is a 401 that counts as no failed
// authentication: nothing was guessed, and any web page can make a
// browser send one.
func (k *Keys) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			secret, err := k.presented(c)
			if err != nil {
				return err
			}
			if secret == "" {
				if k.Sessions != nil {
					if id, ok := k.Cookie.Read(c.Request()); ok {
						return k.withSession(c, next, id)
					}
				}
				return echo.NewHTTPError(http.StatusUnauthorized, "missing API key: send Authorization: Bearer <key>, or sign in (POST /v1/session)")
			}
			user, err := k.Authenticate(c, secret)
			if err != nil {
				return err
			}
			c.Set(userKey, user)
			c.Set(adminKey, k.IsAdminUser(user))
			c.Set(apiKeyKey, Fingerprint(secret))
			return next(c)
		}
	}
}

// Authenticate returns the user of secret, a key presented by the request
// (not empty), or the error to answer: 401 for a wrong key, which counts
// as a failed authentication, and 429 with Retry-After when the failure
// limiter refuses it (FailureLimiter: a wrong key over its budget, or any
// key not used from the address before while the address is over its
// ceiling).
func (k *Keys) Authenticate(c echo.Context, secret string) (string, error) {
	user, ok := k.User(secret)
	if k.Failures == nil {
		if !ok {
			return "", echo.NewHTTPError(http.StatusUnauthorized, "invalid API key")
		}
		return user, nil
	}
	addr, fp := c.RealIP(), Fingerprint(secret)
	if ok {
		if wait, admitted := k.Failures.Admit(addr, fp); !admitted {
			return "", tooMany(c, wait)
		}
		return user, nil
	}
	if wait, blocked := k.Failures.Fail(addr, fp); blocked {
		return "", tooMany(c, wait)
	}
	return "", echo.NewHTTPError(http.StatusUnauthorized, "invalid API key")
}

// presented is the key the request carries ("" when none), or the error
// to answer when it carries one where none is read: not a failed
// authentication, since the key is not looked at.
//
// ?token= is read only on QueryTokenPath and only for a WebSocket upgrade
// (the CLI's), from no Origin or an allowed one (as the WebSocket itself
// checks it): what an <img> or another site's page can make a browser
// send is neither judged nor counted, so no page can spend a visitor's
// failure budget.
func (k *Keys) presented(c echo.Context) (string, error) {
	r := c.Request()
	if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
		s, ok := strings.CutPrefix(h, "Bearer ")
		if s = strings.TrimSpace(s); !ok || s == "" {
			return "", echo.NewHTTPError(http.StatusUnauthorized, "missing API key: send Authorization: Bearer <key>")
		}
		return s, nil
	}
	if !c.QueryParams().Has("token") {
		return "", nil
	}
	if k.QueryTokenPath == "" || c.Path() != k.QueryTokenPath || !c.IsWebSocket() {
		where := "is not accepted"
		if k.QueryTokenPath != "" {
			where = "is only accepted to open the WebSocket (" + k.QueryTokenPath + ")"
		}
		return "", echo.NewHTTPError(http.StatusUnauthorized, "the token query parameter "+where+"; send the key as Authorization: Bearer <key>")
	}
	if origin := r.Header.Get(echo.HeaderOrigin); origin != "" {
		if err := k.Origins.CheckUpgrade(r, origin); err != nil {
			return "", echo.NewHTTPError(http.StatusForbidden, err.Error())
		}
	}
	token := c.QueryParam("token")
	if token == "" {
		return "", echo.NewHTTPError(http.StatusUnauthorized, "missing API key")
	}
	return token, nil
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

// KeyOf returns the Fingerprint of the API key behind a request that
// passed Middleware: the key it carried, or the one its session was
// opened with. Removing that key ends the connections it opened.
func KeyOf(c echo.Context) string {
	fp, _ := c.Get(apiKeyKey).(string)
	return fp
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
