package promptver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Errors of promotion and rollback.
var (
	ErrNotFound   = errors.New("promptver: no such version")
	ErrForbidden  = errors.New("promptver: not yours to change (a person changes only their own versions; installation-wide ones need an administrator)")
	ErrNoPrevious = errors.New("promptver: nothing to roll back to (no earlier installation-wide version was active)")
	ErrShare      = errors.New("promptver: a rollout share is between 0 and 1")
)

// Versions reads versions from Postgres (Reader).
type Versions interface {
	Get(ctx context.Context, id string) (Record, error)
	// Scope are the versions of component in a scope ("":
	// installation-wide), newest first.
	Scope(ctx context.Context, component, user string) ([]Record, error)
	// Votes counts the up and down votes on the answers each version shaped.
	Votes(ctx context.Context, ids []string) (map[string]Tally, error)
}

// Tally is a version's record: the answers it shaped, their votes and
// their judged scores.
type Tally struct {
	Answers, Up, Down int
	Judged            Judged
}

// Judged are the judge's scores of a version's answers: how many were
// judged, and the mean and sample standard deviation of each dimension.
type Judged struct {
	N                                    int
	Correctness, Faithfulness, Relevancy Score
}

// Score is a dimension's mean and sample standard deviation.
type Score struct{ Mean, SD float64 }

// Interval is an estimate with its 95 % confidence interval, within 0..1.
type Interval struct{ Estimate, Low, High float64 }

// z95 is the normal quantile of a two-sided 95 % interval.
const z95 = 1.959963984540054

// RateInterval is the up-vote rate with its Wilson score interval (ok
// false without votes): well-behaved for a few votes and rates near 0 or 1.
func (t Tally) RateInterval() (Interval, bool) {
	n := float64(t.Up + t.Down)
	if n == 0 {
		return Interval{}, false
	}
	p := float64(t.Up) / n
	z2 := z95 * z95
	centre := (p + z2/(2*n)) / (1 + z2/n)
	half := z95 / (1 + z2/n) * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return Interval{Estimate: p, Low: max(0, centre-half), High: min(1, centre+half)}, true
}

// Interval is s's mean over n judged answers with its 95 % confidence
// interval (Student's t for small n; one answer: all of 0..1).
func (s Score) Interval(n int) Interval {
	if n < 2 {
		return Interval{Estimate: s.Mean, Low: 0, High: 1}
	}
	half := tQuantile95(n-1) * s.SD / math.Sqrt(float64(n))
	return Interval{Estimate: s.Mean, Low: max(0, s.Mean-half), High: min(1, s.Mean+half)}
}

// tQuantile95 is Student's t two-sided 95 % quantile for df degrees of
// freedom (the table to 30, then the normal's approached as 1/df).
func tQuantile95(df int) float64 {
	table := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= len(table) {
		return table[df-1]
	}
	return z95 + 2.5/float64(df) // within 0.01 of t for df > 30
}

// Rate is the share of up votes among the votes (0 without votes).
func (t Tally) Rate() float64 {
	if t.Up+t.Down == 0 {
		return 0
	}
	return float64(t.Up) / float64(t.Up+t.Down)
}

// Actor is who asks: a person, an administrator or not.
type Actor struct {
	UserID string
	Admin  bool
}

// may reports whether a may change versions of scope user ("":
// installation-wide): a person their own, an administrator the
// installation's. Nobody changes another person's.
func (a Actor) may(user string) bool {
	if user == "" {
		return a.Admin
	}
	return a.UserID != "" && a.UserID == user
}

// Admin promotes and rolls back versions. It writes nothing itself: it
// publishes PromptVersions, which persistence applies and every llm
// replica hears.
type Admin struct {
	Store   Versions
	Publish Publisher
}

// Listed is a version with its record.
type Listed struct {
	Record
	Tally
}

// List returns the versions of component in scope user ("":
// installation-wide), newest first, with their vote tallies.
func (ad *Admin) List(ctx context.Context, who Actor, component, user string) ([]Listed, error) {
	if !who.may(user) && !(user == "" && who.UserID != "") {
		return nil, ErrForbidden
	}
	vs, err := ad.Store.Scope(ctx, component, user)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	tallies, err := ad.Store.Votes(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Listed, len(vs))
	for i, v := range vs {
		out[i] = Listed{Record: v, Tally: tallies[v.ID]}
	}
	return out, nil
}

// Promote makes version id active, for share of new conversations (nil:
// all of them, retiring the version it replaces; below 1: it rolls out
// beside it).
func (ad *Admin) Promote(ctx context.Context, who Actor, id string, share *float64) (Record, error) {
	if share != nil && (*share < 0 || *share > 1) {
		return Record{}, ErrShare
	}
	v, err := ad.Store.Get(ctx, id)
	if err != nil {
		return v, err
	}
	if !who.may(v.UserID) {
		return v, ErrForbidden
	}
	v.Status, v.Share = protocol.PromptVersionStatusActive, 1
	if share != nil {
		v.Share = *share
	}
	return v, ad.publish(ctx, v)
}

// Adopt makes text a new version of component in scope user ("":
// installation-wide), created by createdBy (run:<id>, user:<id>), active
// at once for share of new conversations (nil: all of them, retiring the
// version it replaces; below 1: rolling out beside it). Its parent is the
// version serving the scope now (a person without their own: the
// installation's); its number the scope's next. Rollback undoes it.
func (ad *Admin) Adopt(ctx context.Context, who Actor, component, user, text, createdBy string, share *float64, now time.Time) (Record, error) {
	if share != nil && (*share < 0 || *share > 1) {
		return Record{}, ErrShare
	}
	if !who.may(user) {
		return Record{}, ErrForbidden
	}
	vs, err := ad.Store.Scope(ctx, component, user)
	if err != nil {
		return Record{}, err
	}
	v := Record{ID: protocol.NewID("pv"), Component: component, Text: text, Version: 1, UserID: user,
		Status: protocol.PromptVersionStatusActive, Share: 1, CreatedBy: createdBy, CreatedAt: now, UpdatedAt: now}
	if share != nil {
		v.Share = *share
	}
	for _, o := range vs {
		v.Version = max(v.Version, o.Version+1)
		if v.ParentID == "" && o.Status == protocol.PromptVersionStatusActive && o.Share >= 1 {
			v.ParentID = o.ID
		}
	}
	if v.ParentID == "" && user != "" {
		inst, err := ad.Store.Scope(ctx, component, "")
		if err != nil {
			return Record{}, err
		}
		for _, o := range inst {
			if o.Status == protocol.PromptVersionStatusActive && o.Share >= 1 {
				v.ParentID = o.ID
				break
			}
		}
	}
	// Its id is new: the Nats-Msg-Id makes a retried publish one version.
	if err := ad.Publish(ctx, v.Protocol(), v.ID); err != nil {
		return Record{}, fmt.Errorf("promptver: publish %s: %w", v.ID, err)
	}
	return v, nil
}

// Rollback undoes the last promotion of component in scope user: a version
// rolling out is retired (the full one serves everyone again); else the
// version active before the current one is active again and the current
// one retired; a person's only version is retired (the installation's
// serves them again). It returns the version serving now ("" for the
// installation's, after a person's last is retired).
func (ad *Admin) Rollback(ctx context.Context, who Actor, component, user string) (string, error) {
	if !who.may(user) {
		return "", ErrForbidden
	}
	vs, err := ad.Store.Scope(ctx, component, user)
	if err != nil {
		return "", err
	}
	var full, rolling *Record
	var previous []Record
	for i := range vs {
		v := &vs[i]
		switch {
		case v.Status == protocol.PromptVersionStatusActive && v.Share < 1 && rolling == nil:
			rolling = v
		case v.Status == protocol.PromptVersionStatusActive && v.Share >= 1 && full == nil:
			full = v
		case v.Status == protocol.PromptVersionStatusRetired && v.Share >= 1:
			previous = append(previous, *v)
		}
	}
	if rolling != nil {
		rolling.Status = protocol.PromptVersionStatusRetired
		if err := ad.publish(ctx, *rolling); err != nil {
			return "", err
		}
		if full != nil {
			return full.ID, nil
		}
		return "", nil
	}
	if full == nil {
		return "", fmt.Errorf("%w: %s has no active version in this scope", ErrNoPrevious, component)
	}
	// The one retired last was active before the current one.
	slices.SortStableFunc(previous, func(a, b Record) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	if len(previous) > 0 {
		p := previous[0]
		p.Status = protocol.PromptVersionStatusActive
		return p.ID, ad.publish(ctx, p) // persistence retires the current one
	}
	if user == "" {
		return "", ErrNoPrevious
	}
	full.Status = protocol.PromptVersionStatusRetired
	return "", ad.publish(ctx, *full)
}

// publish sends a status change; no Nats-Msg-Id: promoting, rolling back
// and promoting again within the duplicate window are three changes.
func (ad *Admin) publish(ctx context.Context, v Record) error {
	if err := ad.Publish(ctx, v.Protocol(), ""); err != nil {
		return fmt.Errorf("promptver: publish %s: %w", v.ID, err)
	}
	return nil
}
