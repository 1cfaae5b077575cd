package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/timeline"
	"github.com/alicia-voice/alicia/services/gateway"
)

type timelinePage struct {
	Steps []timeline.Step `json:"steps"`
	Next  uint64          `json:"next"`
	More  bool            `json:"more"`
	Last  uint64          `json:"last"`
}

// newConversation creates one of user's conversations (its Configuration
// is the timeline's first step).
func (s *stack) newConversation(t *testing.T, key string) string {
	t.Helper()
	var c conversation
	s.call(t, key, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	return c.ID
}

// voiceTurn stores the records of a spoken question and the answer's audio:
// the utterance's AudioChunk, its final Transcription, the answer's first
// sentence's SentenceAudio and SentencePlayout.
func (s *stack) voiceTurn(t *testing.T, cid, utt, answer string) {
	t.Helper()
	ctx := context.Background()
	chunk := protocol.Envelope{StanzaID: 40, ConversationID: cid, Type: protocol.TypeAudioChunk,
		Meta: map[string]any{edge.MetaUserID: "alice", edge.MetaUtteranceID: utt},
		Body: &protocol.AudioChunk{ConversationID: cid, Format: "pcm_s16le_16000", Sequence: 1, DurationMs: 1500, Data: make([]byte, 48000)}}
	if _, err := s.pub.PublishClient(ctx, chunk); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pub.PublishServer(ctx, protocol.New(cid, &protocol.Transcription{ID: utt, ConversationID: cid, Text: "and now?", Final: true}), ""); err != nil {
		t.Fatal(err)
	}
	for _, body := range []protocol.Body{
		&protocol.SentenceAudio{ConversationID: cid, MessageID: answer, SentenceID: "as_1", Sequence: 1, Format: "pcm_s16le_24000", DurationMs: 900, ByteSize: 43200, Data: make([]byte, 43200)},
		&protocol.SentencePlayout{ConversationID: cid, MessageID: answer, SentenceID: "as_1", Sequence: 1, Status: protocol.SentencePlayoutStatusPlayed, PlayedMs: 900},
	} {
		if _, err := s.pub.PublishAgent(ctx, protocol.New(cid, body), ""); err != nil {
			t.Fatal(err)
		}
	}
}

// wantStep is what a step must say: type, origin, summary and link fields.
type wantStep struct {
	typ, origin, summary string
	messageID, replyTo   string
	sentence             int32
	final                *bool
	status               string
}

func checkSteps(t *testing.T, got []timeline.Step, want []wantStep) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Type != w.typ || g.Origin != w.origin || g.Summary != w.summary || g.MessageID != w.messageID || g.ReplyTo != w.replyTo ||
			g.Sentence != w.sentence || g.Status != w.status || (g.Final == nil) != (w.final == nil) || (g.Final != nil && *g.Final != *w.final) ||
			g.Error != "" || g.Envelope != nil {
			t.Errorf("step %d = %+v\nwant %+v", i, g, w)
		}
		if g.TimeMs != g.Time.UnixMilli() || g.Time.IsZero() {
			t.Errorf("step %d: time %v, timeMs %d", i, g.Time, g.TimeMs)
		}
		if i == 0 {
			if g.OffsetMs != 0 || g.GapMs != 0 {
				t.Errorf("first step: offset %d gap %d", g.OffsetMs, g.GapMs)
			}
			continue
		}
		p := got[i-1]
		if g.Sequence <= p.Sequence || g.OffsetMs < p.OffsetMs || g.GapMs != g.Time.Sub(p.Time).Milliseconds() {
			t.Errorf("step %d (seq %d, offset %d, gap %d) after seq %d offset %d", i, g.Sequence, g.OffsetMs, g.GapMs, p.Sequence, p.OffsetMs)
		}
	}
}

func TestTimeline(t *testing.T) {
	s := newStack(t)
	cid := s.newConversation(t, aliceKey)
	other := s.newConversation(t, bobKey) // interleaved, never in alice's timeline
	ans := s.turn(t, "alice", cid, "am_q1", "", "What is 2+2?")
	s.turn(t, "bob", other, "am_b1", "", "Hi")
	s.voiceTurn(t, cid, "am_q2", ans)

	yes := true
	want := []wantStep{
		{typ: "Configuration", origin: "client"},
		{typ: "UserMessage", origin: "client", summary: `"What is 2+2?"`, messageID: "am_q1"},
		{typ: "StartAnswer", origin: "server", summary: "answer " + ans + " to am_q1", messageID: ans, replyTo: "am_q1"},
		{typ: "ReasoningStep", origin: "server", summary: `#1 "think"`, messageID: ans},
		{typ: "ToolUseRequest", origin: "server", summary: `calculator({"expression":"2+2"})`, messageID: ans},
		{typ: "ToolUseResult", origin: "server", summary: ans + "_t1 → 4"},
		{typ: "AssistantSentence", origin: "server", summary: `#1 "Four." (final)`, messageID: ans, sentence: 1, final: &yes},
		{typ: "AudioChunk", origin: "client", summary: "pcm_s16le_16000 #1 1500 ms", messageID: "am_q2"},
		{typ: "Transcription", origin: "server", summary: `final "and now?"`, messageID: "am_q2", final: &yes},
		{typ: "SentenceAudio", origin: "agent", summary: ans + " #1 pcm_s16le_24000 900 ms, 43200 bytes", messageID: ans, sentence: 1},
		{typ: "SentencePlayout", origin: "agent", summary: ans + " #1 played after 900 ms", messageID: ans, sentence: 1, status: "played"},
	}
	var page timelinePage
	r := s.call(t, aliceKey, "GET", "/v1/conversations/"+cid+"/timeline", nil).want(http.StatusOK, &page)
	checkSteps(t, page.Steps, want)
	last := page.Steps[len(page.Steps)-1].Sequence
	if page.More || page.Next != last || page.Last != last {
		t.Fatalf("page: next %d more %v last %d; want next = last = %d, no more", page.Next, page.More, page.Last, last)
	}
	for _, st := range page.Steps {
		if st.Origin == "server" && st.StanzaID != -int32(st.Sequence) {
			t.Errorf("server step %d has stanza id %d", st.Sequence, st.StanzaID)
		}
	}
	// No audio bytes in the answer: the two audio records carry 90 KB.
	if len(r.body) > 8<<10 {
		t.Fatalf("the timeline is %d bytes", len(r.body))
	}
	// The JSON names the web client reads.
	var raw struct {
		Steps []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"seq", "time", "timeMs", "offsetMs", "gapMs", "origin", "type", "stanzaId", "summary", "messageId", "sequence", "final"} {
		if _, ok := raw.Steps[6][key]; !ok {
			t.Errorf("the AssistantSentence step has no %q: %v", key, raw.Steps[6])
		}
	}
	if _, ok := raw.Steps[0]["messageId"]; ok {
		t.Errorf("the Configuration step has a messageId: %v", raw.Steps[0])
	}

	// Another user's conversation is a 403 on both routes, an unknown one a
	// 404, whatever the parameters.
	for _, path := range []string{"/timeline", "/timeline?after=3&limit=2", "/timeline/stream", "/timeline/stream?after=3"} {
		s.call(t, bobKey, "GET", "/v1/conversations/"+cid+path, nil).wantError(http.StatusForbidden)
		s.call(t, aliceKey, "GET", "/v1/conversations/ac_nope"+path, nil).wantError(http.StatusNotFound)
		s.call(t, "", "GET", "/v1/conversations/"+cid+path, nil).wantError(http.StatusUnauthorized)
	}
	// Bad parameters.
	for _, q := range []string{"after=-1", "after=x", "after=1.5", "limit=0", "limit=1001", "limit=-3", "limit=ten"} {
		s.call(t, aliceKey, "GET", "/v1/conversations/"+cid+"/timeline?"+q, nil).wantError(http.StatusBadRequest)
		if strings.HasPrefix(q, "after") {
			s.call(t, aliceKey, "GET", "/v1/conversations/"+cid+"/timeline/stream?"+q, nil).wantError(http.StatusBadRequest)
		}
	}
	s.call(t, aliceKey, "GET", "/v1/conversations/bad.id/timeline", nil).wantError(http.StatusBadRequest)
	req, _ := http.NewRequest("GET", s.base+"/v1/conversations/"+cid+"/timeline/stream", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Last-Event-ID", "seven")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("Last-Event-ID seven: %d", resp.StatusCode)
	}

	// After the end: no steps, next = after, the conversation's last.
	s.call(t, aliceKey, "GET", fmt.Sprintf("/v1/conversations/%s/timeline?after=%d", cid, last+100), nil).want(http.StatusOK, &page)
	if len(page.Steps) != 0 || page.Next != last+100 || page.More || page.Last != last {
		t.Fatalf("page after the end: %+v", page)
	}
	if !strings.Contains(string(s.call(t, aliceKey, "GET", fmt.Sprintf("/v1/conversations/%s/timeline?after=%d", cid, last), nil).body), `"steps":[]`) {
		t.Fatal("an empty page's steps are not []")
	}
	// Each read's consumers are deleted once it is answered.
	if left := s.timelineConsumers(t); len(left) > 0 {
		t.Fatalf("consumers left: %v", left)
	}
}

// timelineConsumers are the gateway's timeline consumers left on
// CONVERSATIONS.
func (s *stack) timelineConsumers(t *testing.T) []string {
	t.Helper()
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(context.Background())
	var left []string
	for n := range names.Name() {
		if strings.HasPrefix(n, "gateway_timeline") {
			left = append(left, n)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return left
}

// TestTimelinePages: a conversation longer than a page, read page by page
// (after = the previous page's next), gives the steps of one whole read,
// offsets and gaps included, with no gap or duplicate; the default page is
// 200 steps.
func TestTimelinePages(t *testing.T) {
	s := newStack(t)
	cid := s.newConversation(t, aliceKey)
	other := s.newConversation(t, aliceKey)
	ctx := context.Background()
	const sentences = 230
	for i := 1; i <= sentences; i++ {
		if _, err := s.pub.PublishServer(ctx, protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: int32(i), Text: "s" + strconv.Itoa(i)}), ""); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // other envelopes between: sequences of the stream, not of the conversation
			if _, err := s.pub.PublishServer(ctx, protocol.New(other, &protocol.AssistantSentence{PreviousID: "am_o", ConversationID: other, Sequence: int32(i), Text: "o"}), ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	var whole timelinePage
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid+"/timeline?limit=1000", nil).want(http.StatusOK, &whole)
	if len(whole.Steps) != sentences+1 || whole.More {
		t.Fatalf("whole read: %d steps, more %v", len(whole.Steps), whole.More)
	}
	last := whole.Steps[sentences].Sequence

	var def timelinePage
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid+"/timeline", nil).want(http.StatusOK, &def)
	if len(def.Steps) != 200 || !def.More || def.Next != def.Steps[199].Sequence || def.Last != last {
		t.Fatalf("default page: %d steps, next %d, more %v, last %d (want 200, more, last %d)", len(def.Steps), def.Next, def.More, def.Last, last)
	}

	var paged []timeline.Step
	after, pages := uint64(0), 0
	for {
		var p timelinePage
		s.call(t, aliceKey, "GET", fmt.Sprintf("/v1/conversations/%s/timeline?after=%d&limit=7", cid, after), nil).want(http.StatusOK, &p)
		pages++
		if len(p.Steps) > 7 || p.Last != last || (len(p.Steps) > 0 && p.Next != p.Steps[len(p.Steps)-1].Sequence) {
			t.Fatalf("page %d after %d: %d steps, next %d, last %d", pages, after, len(p.Steps), p.Next, p.Last)
		}
		paged = append(paged, p.Steps...)
		if !p.More {
			break
		}
		if len(p.Steps) != 7 {
			t.Fatalf("page %d: %d steps and more", pages, len(p.Steps))
		}
		after = p.Next
	}
	if want := (sentences + 1 + 6) / 7; pages != want {
		t.Fatalf("%d pages, want %d", pages, want)
	}
	if len(paged) != len(whole.Steps) {
		t.Fatalf("paged %d steps, whole %d", len(paged), len(whole.Steps))
	}
	for i := range paged {
		p, w := paged[i], whole.Steps[i]
		if p.Sequence != w.Sequence || p.OffsetMs != w.OffsetMs || p.GapMs != w.GapMs || p.Summary != w.Summary || !p.Time.Equal(w.Time) {
			t.Fatalf("step %d paged %+v, whole %+v", i, p, w)
		}
	}

	// A page after a sequence that is not the conversation's: the same
	// steps, offsets from the conversation's start; the first step's gap
	// is not known (0).
	var mid timelinePage
	s.call(t, aliceKey, "GET", fmt.Sprintf("/v1/conversations/%s/timeline?after=%d&limit=3", cid, whole.Steps[50].Sequence+1), nil).want(http.StatusOK, &mid)
	if len(mid.Steps) != 3 || !mid.More {
		t.Fatalf("mid page %+v", mid)
	}
	for i, st := range mid.Steps {
		w := whole.Steps[51+i]
		if st.Sequence != w.Sequence || st.OffsetMs != w.OffsetMs || (i > 0 && st.GapMs != w.GapMs) || (i == 0 && st.GapMs != 0) {
			t.Fatalf("mid page step %d %+v, whole %+v", i, st, w)
		}
	}
}

// sseEvent is one server-sent event; comments are counted apart.
type sseEvent struct{ id, event, data string }

type sseStream struct {
	t        *testing.T
	resp     *http.Response
	events   chan sseEvent
	comments chan string
	ended    chan error // the body's end (nil: EOF)
}

// openStream opens a timeline stream as a browser's EventSource would:
// with the session cookie, and Last-Event-ID when resuming.
func openStream(t *testing.T, base, cookie, cid, query, lastEventID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/conversations/"+cid+"/timeline/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", "alicia_session="+cookie)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	s := &sseStream{t: t, resp: resp, events: make(chan sseEvent, 1024), comments: make(chan string, 1024), ended: make(chan error, 1)}
	if resp.StatusCode != http.StatusOK {
		return s
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	go func() {
		rd := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				s.ended <- err
				return
			}
			line = strings.TrimSuffix(line, "\n")
			field, value, _ := strings.Cut(line, ": ")
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.comments <- strings.TrimSpace(line[1:])
			case field == "id":
				ev.id = value
			case field == "event":
				ev.event = value
			case field == "data":
				ev.data = value
			}
		}
	}()
	return s
}

// next returns the next step of the stream.
func (s *sseStream) next() (string, timeline.Step) {
	s.t.Helper()
	select {
	case ev := <-s.events:
		var st timeline.Step
		if ev.event != "step" {
			s.t.Fatalf("event %q, want step", ev.event)
		}
		if err := json.Unmarshal([]byte(ev.data), &st); err != nil {
			s.t.Fatalf("data %q: %v", ev.data, err)
		}
		if ev.id != strconv.FormatUint(st.Sequence, 10) {
			s.t.Fatalf("id %q, step seq %d", ev.id, st.Sequence)
		}
		return ev.id, st
	case err := <-s.ended:
		s.t.Fatalf("the stream ended (%v)", err)
	case <-time.After(10 * time.Second):
		s.t.Fatal("no step within 10s")
	}
	return "", timeline.Step{}
}

// quiet fails if a step arrives within d.
func (s *sseStream) quiet(d time.Duration) {
	s.t.Helper()
	select {
	case ev := <-s.events:
		s.t.Fatalf("unexpected event %+v", ev)
	case <-time.After(d):
	}
}

func TestTimelineStream(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.gateway = func(c *gateway.Config) { c.Quotas.ConnectionsPerUser = 2 } })
	cookie, _ := signIn(t, s.base, aliceKey)
	cid := s.newConversation(t, aliceKey)
	ans := s.turn(t, "alice", cid, "am_q1", "", "What is 2+2?")

	// Every stored step, then the new ones as they are stored.
	live := openStream(t, s.base, cookie, cid, "", "")
	if live.resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", live.resp.StatusCode)
	}
	var ids []string
	var steps []timeline.Step
	for range 7 {
		id, st := live.next()
		ids, steps = append(ids, id), append(steps, st)
	}
	if steps[0].Type != "Configuration" || steps[6].Type != "AssistantSentence" || steps[6].MessageID != ans {
		t.Fatalf("stored steps %+v", steps)
	}
	live.quiet(200 * time.Millisecond)
	if _, err := s.pub.PublishServer(context.Background(), protocol.New(cid, &protocol.AssistantSentence{PreviousID: ans, ConversationID: cid, Sequence: 2, Text: "Later."}), ""); err != nil {
		t.Fatal(err)
	}
	_, st := live.next()
	if st.Type != "AssistantSentence" || st.Summary != `#2 "Later."` || st.Sentence != 2 || st.MessageID != ans || st.Sequence <= steps[6].Sequence ||
		st.OffsetMs < steps[6].OffsetMs || st.GapMs != st.Time.Sub(steps[6].Time).Milliseconds() {
		t.Fatalf("live step %+v after %+v", st, steps[6])
	}
	steps = append(steps, st)

	// The page has the same steps as the stream.
	var page timelinePage
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid+"/timeline", nil).want(http.StatusOK, &page)
	if len(page.Steps) != len(steps) {
		t.Fatalf("page %d steps, stream %d", len(page.Steps), len(steps))
	}
	for i := range steps {
		if a, b := mustJSON(page.Steps[i]), mustJSON(steps[i]); a != b {
			t.Fatalf("step %d: page %s, stream %s", i, a, b)
		}
	}

	// Resuming (EventSource's Last-Event-ID wins over the URL's after):
	// the steps after that one, with the same offsets and gaps.
	resumed := openStream(t, s.base, cookie, cid, "?after=1", ids[3])
	if resumed.resp.StatusCode != http.StatusOK {
		t.Fatalf("resumed stream: %d", resumed.resp.StatusCode)
	}
	for _, want := range steps[4:] {
		if _, got := resumed.next(); mustJSON(got) != mustJSON(want) {
			t.Fatalf("resumed with %+v, want %+v", got, want)
		}
	}
	resumed.quiet(200 * time.Millisecond)

	// At most ConnectionsPerUser streams per user (2 here), counted apart
	// from WebSockets.
	third := openStream(t, s.base, cookie, cid, "", "")
	if third.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third stream: %d, want 429", third.resp.StatusCode)
	}
	s.dial(t, aliceKey)
	bobCookie, _ := signIn(t, s.base, bobKey)
	if st := openStream(t, s.base, bobCookie, cid, "", ""); st.resp.StatusCode != http.StatusForbidden {
		t.Fatalf("bob's stream of alice's conversation: %d", st.resp.StatusCode)
	}
	// A stream closed by its client frees its place.
	resumed.resp.Body.Close()
	testkit.Eventually(t, 10*time.Second, func() bool {
		st := openStream(t, s.base, cookie, cid, "?after="+ids[6], "")
		st.resp.Body.Close()
		return st.resp.StatusCode == http.StatusOK
	}, "the closed stream's place was not freed")
	// Every stream's consumer is deleted once it ends.
	live.resp.Body.Close()
	testkit.Eventually(t, 10*time.Second, func() bool { return len(s.timelineConsumers(t)) == 0 }, "timeline consumers left")
}

// TestTimelineStreamShutdown: a stream outlives the server's read timeout,
// and ends (a clean end of the body) when the gateway shuts down, without
// holding up the shutdown.
func TestTimelineStreamShutdown(t *testing.T) {
	s := newStack(t)
	const readTimeout = 300 * time.Millisecond
	base, stop := s.replica(t, nil, func(c *gateway.Config) { c.HTTPReadTimeout = readTimeout })
	cookie, _ := signIn(t, base, aliceKey)
	cid := s.newConversation(t, aliceKey)
	stream := openStream(t, base, cookie, cid, "", "")
	if stream.resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", stream.resp.StatusCode)
	}
	if _, st := stream.next(); st.Type != "Configuration" {
		t.Fatalf("first step %+v", st)
	}
	time.Sleep(3 * readTimeout) // past the read timeout: the stream goes on
	s.publish(t, "alice", protocol.New(cid, &protocol.UserMessage{ID: "am_late", ConversationID: cid, Content: "still there?"}))
	if _, st := stream.next(); st.MessageID != "am_late" {
		t.Fatalf("step %+v", st)
	}

	stopped := make(chan struct{})
	start := time.Now()
	go func() { stop(); close(stopped) }()
	select {
	case err := <-stream.ended:
		if err != nil {
			t.Fatalf("the stream ended with %v, want a clean end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open 5s into the shutdown")
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway has not stopped 5s into the shutdown")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	var said []string
	for len(stream.comments) > 0 {
		said = append(said, <-stream.comments)
	}
	if !strings.Contains(strings.Join(said, "|"), "reconnect") {
		t.Fatalf("comments %q: the client was not told to reconnect", said)
	}
}
