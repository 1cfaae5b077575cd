package timers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// The timer tools' names.
const (
	SetTimerName    = "set_timer"
	SetReminderName = "set_reminder"
	ListTimersName  = "list_timers"
	CancelTimerName = "cancel_timer"
)

// maxLabel bounds a label's length (runes).
const maxLabel = 200

// Tools returns the four timer tools, acting through s.
func (s *Scheduler) Tools() []tools.Tool {
	return []tools.Tool{setTool{s, protocol.TimerKindTimer}, setTool{s, protocol.TimerKindReminder}, listTool{s}, cancelTool{s}}
}

func object(props map[string]any, required ...string) map[string]any {
	req := make([]any, 0, len(required))
	for _, r := range required {
		req = append(req, r)
	}
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

var labelProp = map[string]any{"type": "string", "maxLength": maxLabel, "description": "What it is for, in a few words (\"tea\", \"call Anna\")."}

type setTool struct {
	s    *Scheduler
	kind protocol.TimerKind
}

func (t setTool) Spec() tools.Spec {
	if t.kind == protocol.TimerKindTimer {
		return tools.Spec{Name: SetTimerName, Source: tools.SourceBuiltin,
			Description: "Set a timer that goes off after a duration (\"set a timer for ten minutes\"). When it is due the person is told, " +
				"aloud if they are in a call, else by a message and a notification. Answers with when it is due in the person's local time.",
			Parameters: object(map[string]any{
				"duration": map[string]any{"type": "string", "description": "How long, as ISO-8601 (PT10M, PT1H30M) or like 10m, 1h30m, 90s."},
				"label":    labelProp,
			}, "duration")}
	}
	return tools.Spec{Name: SetReminderName, Source: tools.SourceBuiltin,
		Description: "Set a reminder for a time (\"remind me at six to call Anna\"). Give the time in the person's local time zone " +
			"(the current local time is in your instructions). When it is due the person is told, aloud if they are in a call, else by a message and a notification.",
		Parameters: object(map[string]any{
			"when": map[string]any{"type": "string", "description": "When, as a local ISO-8601 date and time (2026-11-29T18:00), a time of day " +
				"(18:00: the next one), or relative (in 2 hours, PT2H)."},
			"label": labelProp,
		}, "when", "label")}
}

func (t setTool) Call(ctx context.Context, inv tools.Invocation, args map[string]any) (any, error) {
	if inv.UserID == "" || inv.ConversationID == "" {
		return nil, tools.ErrNoUser
	}
	label, _ := args["label"].(string)
	label = strings.TrimSpace(label)
	if len([]rune(label)) > maxLabel {
		return nil, fmt.Errorf("%w: the label is over %d characters", tools.ErrInvalidParameters, maxLabel)
	}
	s := t.s
	loc := s.Location(ctx, inv.UserID)
	now := s.now()
	var due time.Time
	var what string
	if t.kind == protocol.TimerKindTimer {
		what, _ = args["duration"].(string)
		d, err := ParseDuration(what)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", tools.ErrInvalidParameters, err)
		}
		if d < time.Second {
			return nil, fmt.Errorf("%w: the duration %q is under a second", tools.ErrInvalidParameters, what)
		}
		due = now.Add(d)
	} else {
		what, _ = args["when"].(string)
		w, err := ParseWhen(what, now, loc)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", tools.ErrInvalidParameters, err)
		}
		if !w.After(now) {
			return nil, fmt.Errorf("%w: %s is in the past (it is now %s): give a time to come", tools.ErrInvalidParameters, Local(w, loc), Local(now, loc))
		}
		due = w
	}
	if due.Sub(now) > s.cfg.MaxAhead {
		return nil, fmt.Errorf("%w: %s is more than %s ahead", tools.ErrInvalidParameters, Local(due, loc), roundDays(s.cfg.MaxAhead))
	}
	if n := len(s.Scheduled(inv.UserID)); n >= s.cfg.PerUser {
		return nil, fmt.Errorf("the person already has %d timers and reminders scheduled, the most allowed: cancel one first", n)
	}
	zone := loc.String()
	// The id comes from the answer and the arguments: the same call in a
	// turn done again (after a crash) sets the same timer, not a second.
	tm := &protocol.Timer{ID: protocol.DeriveID("atm", inv.MessageID, t.kind, what, label), UserID: inv.UserID, ConversationID: inv.ConversationID,
		Kind: t.kind, DueAt: due.UnixMilli(), TimeZone: &zone, Status: protocol.TimerStatusScheduled,
		CreatedAt: now.UnixMilli(), Timestamp: now.UnixMilli()}
	if label != "" {
		tm.Label = &label
	}
	if err := s.publishState(ctx, tm); err != nil {
		return nil, err
	}
	s.apply(tm)
	if s.hooks.Set != nil {
		s.hooks.Set(string(t.kind))
	}
	return describe(tm, loc, now), nil
}

func roundDays(d time.Duration) string { return fmt.Sprintf("%d days", int(d.Hours()/24)) }

// publishState publishes a timer's state on alicia.sys.timer.
func (s *Scheduler) publishState(ctx context.Context, t *protocol.Timer) error {
	env := protocol.New("", t)
	env.Meta = map[string]any{"alicia.user_id": t.UserID}
	if _, err := s.pub.PublishSystem(ctx, env, "timer:"+t.ID+":"+string(t.Status)); err != nil {
		return fmt.Errorf("the timer could not be saved (%v): try again in a moment", err)
	}
	return nil
}

// describe is a timer as the model is told it.
func describe(t *protocol.Timer, loc *time.Location, now time.Time) map[string]any {
	due := time.UnixMilli(t.DueAt)
	out := map[string]any{"id": t.ID, "kind": string(t.Kind), "due": Local(due, loc),
		"dueAt": due.In(loc).Format(time.RFC3339), "in": due.Sub(now).Round(time.Second).String(), "status": string(t.Status)}
	if t.Label != nil {
		out["label"] = *t.Label
	}
	return out
}

type listTool struct{ s *Scheduler }

func (listTool) Spec() tools.Spec {
	return tools.Spec{Name: ListTimersName, Source: tools.SourceBuiltin,
		Description: "List the person's scheduled timers and reminders, soonest first, with their ids, labels and due times in local time.",
		Parameters:  object(map[string]any{})}
}

func (t listTool) Call(ctx context.Context, inv tools.Invocation, _ map[string]any) (any, error) {
	if inv.UserID == "" {
		return nil, tools.ErrNoUser
	}
	loc, now := t.s.Location(ctx, inv.UserID), t.s.now()
	out := []any{}
	for _, tm := range t.s.Scheduled(inv.UserID) {
		out = append(out, describe(tm, loc, now))
	}
	return map[string]any{"now": Local(now, loc), "scheduled": out}, nil
}

type cancelTool struct{ s *Scheduler }

func (cancelTool) Spec() tools.Spec {
	return tools.Spec{Name: CancelTimerName, Source: tools.SourceBuiltin,
		Description: "Cancel one of the person's scheduled timers or reminders, by its id (from list_timers) or its label.",
		Parameters: object(map[string]any{
			"id":    map[string]any{"type": "string", "description": "The timer's id (atm_…)."},
			"label": map[string]any{"type": "string", "description": "Its label, or a word of it, when the id is not known."},
		})}
}

func (t cancelTool) Call(ctx context.Context, inv tools.Invocation, args map[string]any) (any, error) {
	if inv.UserID == "" {
		return nil, tools.ErrNoUser
	}
	id, _ := args["id"].(string)
	label, _ := args["label"].(string)
	id, label = strings.TrimSpace(id), strings.ToLower(strings.TrimSpace(label))
	if id == "" && label == "" {
		return nil, fmt.Errorf("%w: give the id or the label of the timer to cancel", tools.ErrInvalidParameters)
	}
	var found []*protocol.Timer
	for _, tm := range t.s.Scheduled(inv.UserID) {
		l := ""
		if tm.Label != nil {
			l = strings.ToLower(*tm.Label)
		}
		if (id != "" && tm.ID == id) || (id == "" && l != "" && strings.Contains(l, label)) {
			found = append(found, tm)
		}
	}
	loc, now := t.s.Location(ctx, inv.UserID), t.s.now()
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no scheduled timer or reminder matches (id %q, label %q): list_timers shows them", id, label)
	case 1:
	default:
		var ids []string
		for _, f := range found {
			ids = append(ids, f.ID+" ("+Local(time.UnixMilli(f.DueAt), loc)+")")
		}
		return nil, fmt.Errorf("%d timers match the label %q: cancel one by id: %s", len(found), label, strings.Join(ids, ", "))
	}
	c := *found[0]
	c.Status, c.Timestamp = protocol.TimerStatusCancelled, now.UnixMilli()
	if err := t.s.publishState(ctx, &c); err != nil {
		return nil, err
	}
	t.s.apply(&c)
	if t.s.hooks.Cancelled != nil {
		t.s.hooks.Cancelled()
	}
	return describe(&c, loc, now), nil
}
