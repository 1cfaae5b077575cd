package fakeopenai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func statusOf(err error) int {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	return 0
}

func TestStatusFaults(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("ok")))
			c := client(s, "")
			s.SetFault(fakeopenai.Fault{Status: status})
			_, err := c.CreateChatCompletionStream(t.Context(), userMessage("hi"))
			if statusOf(err) != status {
				t.Errorf("stream: err = %v, want HTTP %d", err, status)
			}
			_, err = c.CreateEmbeddings(t.Context(), openai.EmbeddingRequest{Input: "x"})
			if statusOf(err) != status {
				t.Errorf("embeddings: err = %v, want HTTP %d", err, status)
			}
			s.SetFault(fakeopenai.Fault{})
			if got := collect(t, t.Context(), c, userMessage("hi")); got.content != "ok" {
				t.Errorf("after recovery = %q", got.content)
			}
		})
	}
}

func TestFailNextThenRecover(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Text("recovered"))
	s.FailNext(2, http.StatusServiceUnavailable)
	c := client(s, "")
	for i := range 2 {
		if _, err := c.CreateChatCompletion(t.Context(), userMessage("hi")); statusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("attempt %d: err = %v, want 503", i, err)
		}
	}
	resp, err := c.CreateChatCompletion(t.Context(), userMessage("hi"))
	if err != nil || resp.Choices[0].Message.Content != "recovered" {
		t.Fatalf("third attempt: %+v, %v", resp, err)
	}
}

func TestScriptedStatus(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Turn{Status: http.StatusInternalServerError}, fakeopenai.Text("fine"))
	c := client(s, "")
	if _, err := c.CreateChatCompletion(t.Context(), userMessage("hi")); statusOf(err) != http.StatusInternalServerError {
		t.Fatalf("err = %v, want 500", err)
	}
	if got := collect(t, t.Context(), c, userMessage("hi")); got.content != "fine" {
		t.Fatalf("next turn = %q", got.content)
	}
}

func TestHangUntilTimeout(t *testing.T) {
	s := fakeopenai.New(t)
	s.SetFault(fakeopenai.Fault{Hang: true})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client(s, "").CreateChatCompletionStream(ctx, userMessage("hi"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context deadline", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %s, want about 100ms", d)
	}
}

func TestHangUntilCancel(t *testing.T) {
	s := fakeopenai.New(t)
	s.SetFault(fakeopenai.Fault{Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client(s, "").CreateEmbeddings(ctx, openai.EmbeddingRequest{Input: "x"})
		done <- err
	}()
	testkit.Eventually(t, 2*time.Second, func() bool { return len(s.EmbeddingRequests()) == 1 }, "request received")
	select {
	case err := <-done:
		t.Fatalf("answered while hanging: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

// A hung request must not keep the server from shutting down.
func TestCloseReleasesHang(t *testing.T) {
	s := fakeopenai.New(t)
	s.SetFault(fakeopenai.Fault{Hang: true})
	done := make(chan error, 1)
	go func() {
		_, err := client(s, "").ListModels(context.Background())
		done <- err
	}()
	testkit.Eventually(t, 2*time.Second, func() bool { return s.Active() > 0 }, "request in flight")
	s.Close()
	if err := <-done; err == nil {
		t.Fatal("hung request answered successfully after Close")
	}
}

func TestDown(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("back")))
	c := client(s, "")
	s.SetFault(fakeopenai.Fault{Down: true})
	if _, err := c.CreateChatCompletion(t.Context(), userMessage("hi")); err == nil || statusOf(err) != 0 {
		t.Fatalf("down: err = %v, want a transport error", err)
	}
	s.SetFault(fakeopenai.Fault{})
	if got := collect(t, t.Context(), c, userMessage("hi")); got.content != "back" {
		t.Fatalf("after down = %q", got.content)
	}
}

func TestLatency(t *testing.T) {
	const latency, chunkDelay = 150 * time.Millisecond, 20 * time.Millisecond
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Turn{Text: []string{"a", "b", "c", "d"}})
	s.SetFault(fakeopenai.Fault{Latency: latency, ChunkDelay: chunkDelay})
	start := time.Now()
	req := userMessage("hi")
	req.Stream = true
	st, err := client(s, "").CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	total := time.Since(start)
	// role, 4 text deltas and the finish chunk: 5 gaps.
	if first < latency || total < latency+5*chunkDelay {
		t.Errorf("first chunk after %s (want ≥ %s), stream done after %s (want ≥ %s)", first, latency, total, latency+5*chunkDelay)
	}
	t.Logf("first chunk %s, whole stream %s", first, total)
}

// Faults change while requests run; -race checks the handler's locking.
func TestConcurrentFaults(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("ok")))
	c := client(s, "")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 10 {
				if i%2 == 0 {
					_, _ = c.CreateChatCompletion(t.Context(), userMessage("hi"))
				} else {
					_, _ = c.CreateEmbeddings(t.Context(), openai.EmbeddingRequest{Input: "hi"})
				}
			}
		})
	}
	for i := range 20 {
		s.SetFault(fakeopenai.Fault{Status: []int{0, 503}[i%2]})
	}
	wg.Wait()
	if n := len(s.Requests()); n != 40 {
		t.Errorf("recorded %d chat requests, want 40", n)
	}
}

// A backend dying mid-answer must reach the client as an error, with the
// partial answer already delivered.
func TestDropMidStream(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Text("one two three four five"))
	s.SetFault(fakeopenai.Fault{DropAfter: 3})
	req := userMessage("hi")
	req.Stream = true
	st, err := client(s, "").CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var partial string
	for {
		resp, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatalf("clean end after %q, want a transport error", partial)
			}
			break
		}
		partial += resp.Choices[0].Delta.Content
	}
	if partial != "one two" {
		t.Errorf("partial answer = %q, want %q", partial, "one two")
	}
}
