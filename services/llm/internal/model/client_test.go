package model_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
)

func newClient(s *fakeopenai.Server, attempts, threshold int, timeout time.Duration) *model.Client {
	br := &model.Breaker{Threshold: threshold, Cooldown: 200 * time.Millisecond}
	return model.New(model.Config{BaseURL: s.URL(), APIKey: "sk", Model: "fake-chat", Timeout: timeout, Attempts: attempts, Backoff: 5 * time.Millisecond}, br)
}

func user(s string) model.Request {
	return model.Request{Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: s}}}
}

type collected struct {
	mu                 sync.Mutex
	reasoning, content strings.Builder
	deltas             int
}

func (c *collected) add(d model.Delta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reasoning.WriteString(d.Reasoning)
	c.content.WriteString(d.Content)
	c.deltas++
}

func TestStreamTextReasoningAndToolCalls(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithAPIKey("sk"))
	s.Enqueue(fakeopenai.Turn{Reasoning: []string{"Let me ", "think."}, Text: fakeopenai.Words("Hello there. How are you?")})
	s.Enqueue(fakeopenai.Calls(fakeopenai.ToolCall{ID: "call_1", Name: "calculator", Arguments: `{"expression":"2*(3+4)"}`},
		fakeopenai.ToolCall{Name: "web_search", Arguments: `{"query":"go"}`}))
	c := newClient(s, 1, 5, 2*time.Second)

	var got collected
	res, err := c.Stream(t.Context(), user("hi"), got.add)
	if err != nil {
		t.Fatal(err)
	}
	if got.reasoning.String() != "Let me think." || got.content.String() != "Hello there. How are you?" || got.deltas < 5 {
		t.Errorf("reasoning %q content %q in %d deltas", got.reasoning.String(), got.content.String(), got.deltas)
	}
	if res.FinishReason != openai.FinishReasonStop || len(res.ToolCalls) != 0 || !res.Streamed || res.Usage == nil {
		t.Errorf("result %+v", res)
	}

	req := user("maths")
	req.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "calculator"}}}
	res, err = c.Stream(t.Context(), req, got.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != openai.FinishReasonToolCalls || len(res.ToolCalls) != 2 || res.Streamed {
		t.Fatalf("result %+v", res)
	}
	if tc := res.ToolCalls[0]; tc.ID != "call_1" || tc.Function.Name != "calculator" || tc.Function.Arguments != `{"expression":"2*(3+4)"}` {
		t.Errorf("first call %+v", tc)
	}
	if tc := res.ToolCalls[1]; tc.ID == "" || tc.Function.Name != "web_search" || tc.Function.Arguments != `{"query":"go"}` {
		t.Errorf("second call %+v", tc)
	}
	if r := s.Requests()[1]; len(r.Tools) != 1 || r.Tools[0].Name != "calculator" {
		t.Errorf("tools sent = %+v", r.Tools)
	}
}

func TestFailures(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(s *fakeopenai.Server)
		attempts int
		timeout  time.Duration
		wantErr  error // nil: success
		wantReqs int
		streamed bool
	}{
		{"500 twice then ok", func(s *fakeopenai.Server) { s.FailNext(2, 500) }, 3, time.Second, nil, 3, true},
		{"503 every time", func(s *fakeopenai.Server) { s.SetFault(fakeopenai.Fault{Status: 503}) }, 3, time.Second, model.ErrUnavailable, 3, false},
		{"429 is retried", func(s *fakeopenai.Server) { s.FailNext(1, 429) }, 2, time.Second, nil, 2, true},
		{"400 is not retried", func(s *fakeopenai.Server) { s.FailNext(1, 400) }, 3, time.Second, model.ErrRejected, 1, false},
		{"backend down", func(s *fakeopenai.Server) { s.SetFault(fakeopenai.Fault{Down: true}) }, 2, time.Second, model.ErrUnavailable, 2, false},
		{"hang: idle timeout", func(s *fakeopenai.Server) { s.SetFault(fakeopenai.Fault{Hang: true}) }, 2, 100 * time.Millisecond, model.ErrIdleTimeout, 2, false},
		{"gap before any text: idle timeout, retried", func(s *fakeopenai.Server) { s.SetFault(fakeopenai.Fault{ChunkDelay: 300 * time.Millisecond}) }, 3, 100 * time.Millisecond, model.ErrIdleTimeout, 3, false},
		{"cut mid-stream: not retried", func(s *fakeopenai.Server) { s.SetFault(fakeopenai.Fault{DropAfter: 4}) }, 3, time.Second, model.ErrUnavailable, 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("One. Two. Three. Four. Five.")))
			c.setup(s)
			cl := newClient(s, c.attempts, 100, c.timeout)
			var got collected
			res, err := cl.Stream(t.Context(), user("hi"), got.add)
			if c.wantErr == nil {
				if err != nil || got.content.String() != "One. Two. Three. Four. Five." {
					t.Fatalf("err %v, content %q", err, got.content.String())
				}
			} else {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				if errors.Is(c.wantErr, model.ErrIdleTimeout) && !errors.Is(err, model.ErrUnavailable) {
					t.Fatalf("err = %v, want it to be ErrUnavailable", err)
				}
			}
			if n := len(s.Requests()); n != c.wantReqs || res.Attempts != c.wantReqs {
				t.Errorf("requests = %d, attempts = %d, want %d", n, res.Attempts, c.wantReqs)
			}
			if res.Streamed != c.streamed {
				t.Errorf("streamed = %v, want %v", res.Streamed, c.streamed)
			}
		})
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("ok")))
	s.SetFault(fakeopenai.Fault{Status: 500})
	c := newClient(s, 2, 3, time.Second) // opens after 3 failed requests
	var got collected
	for range 2 {
		if _, err := c.Stream(t.Context(), user("x"), got.add); !errors.Is(err, model.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	}
	if st := c.Breaker().State(); st != model.Open {
		t.Fatalf("state after 4 failures = %s", st)
	}
	before := len(s.Requests())
	start := time.Now()
	_, err := c.Stream(t.Context(), user("x"), got.add)
	if !errors.Is(err, model.ErrBreakerOpen) || !errors.Is(err, model.ErrUnavailable) || len(s.Requests()) != before {
		t.Fatalf("open breaker: err %v, %d new requests", err, len(s.Requests())-before)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("fail fast took %s", d)
	}
	s.SetFault(fakeopenai.Fault{}) // the backend is back
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := c.Stream(t.Context(), user("x"), got.add)
		if err == nil {
			break
		}
		if !errors.Is(err, model.ErrBreakerOpen) || time.Now().After(deadline) {
			t.Fatalf("after recovery: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the cool-down is the thing under test
	}
	if st := c.Breaker().State(); st != model.Closed {
		t.Fatalf("state after a good probe = %s", st)
	}
}

func TestCancelStopsTheStream(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("a b c d e f g h i j k l m n o p")))
	s.SetFault(fakeopenai.Fault{ChunkDelay: 200 * time.Millisecond})
	c := newClient(s, 3, 1, 5*time.Second)
	ctx, cancel := context.WithCancelCause(t.Context())
	stopped := errors.New("stopped by the user")
	var first sync.Once
	var at time.Time
	_, err := c.Stream(ctx, user("x"), func(model.Delta) {
		first.Do(func() { at = time.Now(); cancel(stopped) })
	})
	if !errors.Is(err, stopped) {
		t.Fatalf("err = %v, want the cancel cause", err)
	}
	if d := time.Since(at); d > 50*time.Millisecond {
		t.Fatalf("stream ended %s after the cancel", d)
	}
	if st := c.Breaker().State(); st != model.Closed || len(s.Requests()) != 1 {
		t.Fatalf("a cancel counted as a failure: state %s, %d requests", st, len(s.Requests()))
	}
}
