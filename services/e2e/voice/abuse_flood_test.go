package voice_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// wsConn is one user's WebSocket to the gateway, speaking msgpack
// envelopes; every envelope read goes to onEnv, on the reading goroutine.
type wsConn struct {
	c    *websocket.Conn
	cid  string
	next atomic.Int32
	done chan struct{} // closed when reading ends
}

// errUpgradeRefused is a WebSocket upgrade the gateway answered with 429
// (the user's connections are all open).
var errUpgradeRefused = errors.New("upgrade refused with 429")

func dialWS(ctx context.Context, base, key string, onEnv func(protocol.Envelope)) (*wsConn, error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
			return nil, errUpgradeRefused
		}
		return nil, err
	}
	c.SetReadLimit(8 << 20)
	w := &wsConn{c: c, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if env, err := protocol.Decode(b); err == nil {
				onEnv(env)
			}
		}
	}()
	return w, nil
}

func (w *wsConn) send(ctx context.Context, body protocol.Body) error {
	b, err := protocol.Encode(protocol.Envelope{StanzaID: w.next.Add(1), ConversationID: w.cid, Type: body.MessageType(), Body: body})
	if err != nil {
		return err
	}
	return w.c.Write(ctx, websocket.MessageBinary, b)
}

func (w *wsConn) close() {
	w.c.CloseNow()
	<-w.done
}

// restCall calls the gateway's REST API with key; out (when not nil)
// takes the JSON answer of a 2xx.
func restCall(ctx context.Context, base, key, method, path string, out any) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 || out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp, nil
	}
	return resp, json.NewDecoder(resp.Body).Decode(out)
}

// metaInt reads an integer meta value (MessagePack gives any int width).
func metaInt(v any) int64 {
	switch n := v.(type) {
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// floodCounts are the flooder's envelopes (and REST creations) by kind:
// sent, and refused by code and budget.
type floodCounts struct {
	mu      sync.Mutex
	sent    map[string]int
	refused map[string]int // "kind/code[/budget]"
	bytes   map[string]int64
}

func (f *floodCounts) add(m map[string]int, key string, n int) {
	f.mu.Lock()
	m[key] += n
	f.mu.Unlock()
}

// flooder is one user with one ordinary API key sending as fast as the
// edges take it: 1 MiB AudioChunks, messages as long as the message budget
// allows (each one a turn), new conversations over the WebSocket and REST,
// and turns spread over every conversation it holds, on as many
// WebSockets as it may open. It slows only when refused: an over-budget
// refusal (505) holds that connection until the budget frees (its
// alicia.retry_after_ms), a rate refusal (504) for one envelope interval;
// the WebSocket's own pacing (the gateway reads no faster than the
// envelope rates) slows its writes by TCP.
type flooder struct {
	base, key string
	msgChars  int // the message budget: the longest text taken
	conns     int // WebSockets at once: the per-user limit

	stop   atomic.Bool
	halted chan struct{} // closed with stop: ends every hold at once
	counts floodCounts

	mu          sync.Mutex
	convs       []string // conversations it holds
	rr          int
	noNewConvWS atomic.Bool // the conversations budget refused a new one
}

const (
	floodAudioChunk   = 1<<20 - 4<<10 // the largest chunk whose envelope fits in protocol.MaxEnvelopeSize
	floodTurnsPerConv = 10            // messages sent to a conversation before moving on to another
	floodAudioConns   = 2
)

func newFlooder(base, key string, msgChars, conns int) *flooder {
	return &flooder{base: base, key: key, halted: make(chan struct{}), msgChars: msgChars, conns: conns,
		counts: floodCounts{sent: map[string]int{}, refused: map[string]int{}, bytes: map[string]int64{}}}
}

// run floods until halt is called; it returns when every worker has
// finished (each connection's last envelopes judged, see conversation).
func (f *flooder) run() (halt func()) {
	var wg sync.WaitGroup
	wg.Go(f.restConversations)
	for i := range f.conns - 1 { // one connection left for reconnecting
		if i < floodAudioConns {
			wg.Go(func() { f.worker("audio") })
		} else {
			wg.Go(func() { f.worker("text") })
		}
	}
	return func() {
		f.stop.Store(true)
		close(f.halted)
		wg.Wait()
	}
}

func (f *flooder) addConv(cid string) {
	f.mu.Lock()
	f.convs = append(f.convs, cid)
	f.mu.Unlock()
}

// nextConv is one of its conversations, in turn ("" when it has none).
func (f *flooder) nextConv() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.convs) == 0 {
		return ""
	}
	f.rr++
	return f.convs[f.rr%len(f.convs)]
}

// restConversations creates conversations through the REST API as fast as
// it is allowed (429: it waits for Retry-After).
func (f *flooder) restConversations() {
	for !f.stop.Load() {
		var c struct {
			ID string `json:"id"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := restCall(ctx, f.base, f.key, http.MethodPost, "/v1/conversations", &c)
		cancel()
		f.counts.add(f.counts.sent, "rest-conversation", 1)
		if err != nil {
			f.counts.add(f.counts.refused, "rest-conversation/error", 1)
			f.hold(time.Second)
			continue
		}
		if resp.StatusCode/100 == 2 {
			f.addConv(c.ID)
			continue
		}
		f.counts.add(f.counts.refused, "rest-conversation/"+strconv.Itoa(resp.StatusCode), 1)
		wait := time.Second
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			wait = time.Duration(s) * time.Second
		}
		f.hold(wait)
	}
}

// hold waits d, or until the flood stops: the flooder's pacing.
func (f *flooder) hold(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.halted:
	}
}

// worker keeps one WebSocket busy: audio on one conversation it keeps, or
// text turns on conversation after conversation.
func (f *flooder) worker(kind string) {
	for !f.stop.Load() {
		if err := f.conversation(kind); err != nil {
			if errors.Is(err, errUpgradeRefused) {
				f.counts.add(f.counts.refused, "ws-upgrade/429", 1)
			} else {
				f.counts.add(f.counts.refused, "ws/"+err.Error(), 1)
			}
			f.hold(50 * time.Millisecond)
		}
	}
}

// conversation opens a WebSocket, binds it to a new conversation (or one
// it holds, once the conversations budget refuses new ones), floods it
// until the flood stops (audio) or for floodTurnsPerConv messages (text),
// then sends a second Configuration: its refusal (already configured)
// comes after the answers to everything sent before, so every envelope's
// refusal has been counted when the connection closes.
func (f *flooder) conversation(kind string) error {
	var holdUntil atomic.Int64
	// configured takes the conversation bound, or "" when an envelope was
	// refused before (the Configuration: the worker starts again).
	configured := make(chan string, 1)
	signal := func(c chan string, v string) {
		select {
		case c <- v:
		default:
		}
	}
	marker := make(chan string, 1)
	onEnv := func(env protocol.Envelope) {
		switch b := env.Body.(type) {
		case *protocol.Configuration:
			if b.ConversationID != nil {
				signal(configured, *b.ConversationID)
			}
		case *protocol.ErrorMessage:
			if b.Code == protocol.CodeInvalidState {
				signal(marker, "")
				return
			}
			signal(configured, "")
			switch b.Code {
			case protocol.CodeOverBudget:
				budget, _ := env.Meta[edge.MetaBudget].(string)
				if budget == edge.BudgetConversations {
					f.noNewConvWS.Store(true)
				}
				f.counts.add(f.counts.refused, fmt.Sprintf("%s/505/%s", kind, budget), 1)
				wait := time.Duration(metaInt(env.Meta[edge.MetaRetryAfterMs])) * time.Millisecond
				holdUntil.Store(time.Now().Add(wait).UnixNano())
			case protocol.CodeOverloaded:
				f.counts.add(f.counts.refused, kind+"/504", 1)
				holdUntil.Store(time.Now().Add(20 * time.Millisecond).UnixNano())
			default:
				f.counts.add(f.counts.refused, fmt.Sprintf("%s/%d", kind, b.Code), 1)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	w, err := dialWS(ctx, f.base, f.key, onEnv)
	cancel()
	if err != nil {
		return err
	}
	defer w.close()
	write := func(body protocol.Body, what string, n int64) error {
		for d := time.Until(time.Unix(0, holdUntil.Load())); d > 0 && !f.stop.Load(); d = time.Until(time.Unix(0, holdUntil.Load())) {
			f.hold(d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := w.send(ctx, body); err != nil {
			return err
		}
		f.counts.add(f.counts.sent, what, 1)
		f.counts.mu.Lock()
		f.counts.bytes[what] += n
		f.counts.mu.Unlock()
		return nil
	}
	features := []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}
	cfg := &protocol.Configuration{Features: features}
	if f.noNewConvWS.Load() {
		cid := f.nextConv()
		if cid == "" {
			f.hold(100 * time.Millisecond)
			return nil
		}
		cfg.ConversationID = &cid
		if err := write(cfg, "ws-resume", 0); err != nil {
			return err
		}
	} else if err := write(cfg, "ws-conversation", 0); err != nil {
		return err
	}
	select {
	case cid := <-configured:
		if cid == "" {
			return nil // refused (for the conversations budget, the next one resumes one it holds)
		}
		if cfg.ConversationID == nil {
			f.addConv(cid)
		}
		w.cid = cid
	case <-w.done:
		return errors.New("closed before configured")
	case <-time.After(30 * time.Second):
		return errors.New("no Configuration answer")
	}
	if kind == "audio" {
		data := make([]byte, floodAudioChunk)
		_, _ = rand.Read(data) // incompressible, as stored audio is
		for seq := int32(1); !f.stop.Load(); seq++ {
			if err := write(&protocol.AudioChunk{ConversationID: w.cid, Data: data, Format: "pcm_s16le_16000",
				DurationMs: floodAudioChunk / 32, Sequence: seq}, "audio", floodAudioChunk); err != nil {
				return err
			}
		}
	} else {
		text := strings.Repeat("flood ", f.msgChars/6+1)[:f.msgChars]
		for range floodTurnsPerConv {
			if f.stop.Load() {
				break
			}
			if err := write(&protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: w.cid, Content: text,
				Timestamp: protocol.Ptr(time.Now().UnixMilli())}, "text", int64(len(text))); err != nil {
				return err
			}
		}
	}
	if err := w.send(context.Background(), cfg); err != nil {
		return err
	}
	select {
	case <-marker:
	case <-w.done:
	case <-time.After(time.Minute):
	}
	return nil
}

// report is the flooder's counts, sorted by name.
func (f *flooder) report() (sent, refused map[string]int, bytes map[string]int64) {
	f.counts.mu.Lock()
	defer f.counts.mu.Unlock()
	sent, refused, bytes = map[string]int{}, map[string]int{}, map[string]int64{}
	for k, v := range f.counts.sent {
		sent[k] = v
	}
	for k, v := range f.counts.refused {
		refused[k] = v
	}
	for k, v := range f.counts.bytes {
		bytes[k] = v
	}
	return sent, refused, bytes
}
