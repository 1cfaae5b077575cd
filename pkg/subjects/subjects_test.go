package subjects_test

import (
	"errors"
	"testing"

	"github.com/alicia-voice/alicia/pkg/subjects"
)

type tok string

func (t tok) Token() string { return string(t) }

type convID string

func TestBuild(t *testing.T) {
	cases := []struct {
		name, got, want string
	}{
		{"client", subjects.Client(convID("ac_1"), tok("user_message")), "alicia.conv.ac_1.client.user_message"},
		{"server", subjects.Server("ac_1", tok("assistant_sentence")), "alicia.conv.ac_1.server.assistant_sentence"},
		{"conversation", subjects.Conversation("ac_1"), "alicia.conv.ac_1.>"},
		{"server all", subjects.ServerAll("ac_1"), "alicia.conv.ac_1.server.>"},
		{"client all", subjects.ClientAll("ac_1"), "alicia.conv.ac_1.client.>"},
		{"all of type", subjects.AllOfType(subjects.OriginClient, tok("user_message")), "alicia.conv.*.client.user_message"},
		{"system", subjects.System(tok("memory_action")), "alicia.sys.memory_action"},
		{"dlq", subjects.DeadLetter("persistence"), "alicia.dlq.persistence"},
		{"asr", subjects.ASRJob("ac_1"), "alicia.asr.jobs.ac_1"},
		{"audio", subjects.AudioOut("ac_1"), "alicia.audio.ac_1.out"},
		{"control", subjects.Control("ac_1"), "alicia.ctl.ac_1"},
		{"agent", subjects.Agent("ac_1", tok("sentence_playout")), "alicia.conv.ac_1.agent.sentence_playout"},
		{"dispatch", subjects.Dispatch("user-1", "ac_1"), "alicia.agent.dispatch." + subjects.DispatchUser("user-1") + ".ac_1"},
		{"dispatches of a user", subjects.UserDispatches("a.b c"), "alicia.agent.dispatch." + subjects.DispatchUser("a.b c") + ".*"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %q, want %q", c.got, c.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	p, err := subjects.Parse(subjects.Client("ac_9", tok("feedback")))
	if err != nil {
		t.Fatal(err)
	}
	if p.ConversationID != "ac_9" || p.Origin != subjects.OriginClient || p.TypeToken != "feedback" {
		t.Fatalf("parsed %+v", p)
	}
	bad := []string{"", "alicia.conv.ac_1", "alicia.conv.ac_1.other.x", "alicia.sys.x", "x.conv.a.client.b", "alicia.conv..client.b", "alicia.conv.a.client.b.c"}
	for _, s := range bad {
		t.Run(s, func(t *testing.T) {
			if _, err := subjects.Parse(s); !errors.Is(err, subjects.ErrInvalid) {
				t.Fatalf("Parse(%q) err = %v, want ErrInvalid", s, err)
			}
		})
	}
	if tt, err := subjects.ParseSystem("alicia.sys.memory_action"); err != nil || tt != "memory_action" {
		t.Fatalf("ParseSystem = %q, %v", tt, err)
	}
}

func TestValidate(t *testing.T) {
	for _, s := range []string{"", "a.b", "a*", "a>", "a b", "a\nb"} {
		if subjects.Validate(s) == nil {
			t.Errorf("Validate(%q) = nil, want error", s)
		}
	}
	if err := subjects.Validate("ac_AbC123"); err != nil {
		t.Fatal(err)
	}
}
