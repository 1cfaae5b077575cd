package agent

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Barge-in: the user speaks over the answer for BargeInMin. The answer is
// lowered at once (DuckDB, -20 dB: the frame after the decision is the
// first lowered; at -60 dB or below it pauses instead), but not dropped
// yet: a cough, a door or "mm-hmm" is no interruption. It is confirmed when
// the interrupting speech has words that are not only a backchannel (a
// partial, speculative or final Transcription; Backchannels) — and only
// then do the ControlStop (speech) and the interrupted/unplayed
// SentencePlayout records go out, as they always did. When every
// interrupting utterance has ended without words (its final transcript
// came empty, or none came within BargeInWordsWait), or with only
// backchannel words, the answer goes back to its level (a paused one
// resumes from the start of the sentence it cut) and a TurnEvent records
// it: false_interruption, or backchannel with what was said. A backchannel
// becomes no user message (its final ASR job says so) and the answer
// started speculatively on it is cancelled.
//
// Words that are the answer's own (echo.go: an echo the canceller missed —
// a delay beyond its search, a speaker that distorts, a machine too busy to
// keep the two clocks together) are treated alike: the answer goes back to
// its level, a TurnEvent false_interruption with reason echo records what
// was heard, and the utterance becomes no user message (ASRJob.echo). This
// holds for any utterance said while the answer plays, not only one that
// barged in: the answer's own words are never answered.

// pauseCap bounds a pause whose utterance never ends (its track went away).
const pauseCap = 30 * time.Second

// interruption is a barge-in waiting for words.
type interruption struct {
	turn  string    // the answer paused
	cut   Stopped   // what the pause cut
	at    time.Time // when playout paused
	onset time.Time // of the first interrupting speech
	// utts are the utterances that barged in while paused, by id, with
	// when each ended (zero while it goes on) and whether its final
	// transcript came empty.
	utts  map[string]time.Time
	empty map[string]bool
	first string // the utterance that paused playout
	// ducked: playout was lowered (not paused).
	ducked bool
	// back holds the utterances heard as backchannels, with their words;
	// echo those heard as the answer's own words.
	back, echo map[string]string
	// span is the voice.barge_in span: the ControlStop or TurnEvent that
	// settles the interruption carries it.
	span trace.SpanContext
	// notAddressed: an interrupting utterance was hands-free speech not
	// addressed to Alicia (nothing of it is recorded).
	notAddressed bool
}

// bargeIn: utterance (speech since onset) has reached BargeInMin while the
// agent answers. Called from the listener, under its lock.
func (t *tracker) bargeIn(utterance string, onset time.Time) {
	t.barging.Lock()
	defer t.barging.Unlock()
	t.mu.Lock()
	if p := t.paused; p != nil { // already paused: this speech must have words too
		if _, ok := p.utts[utterance]; !ok {
			p.utts[utterance] = time.Time{}
		}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	turnID, busy := t.busy()
	if !busy {
		return
	}
	decided := time.Now()
	ducked := t.r.cfg.DuckDB > -60
	var cut Stopped
	if ducked {
		cut = t.r.player.Duck(t.r.cfg.DuckDB)
	} else {
		cut = t.r.player.Pause()
	}
	stopped := time.Now()
	if cut.Turn != "" {
		turnID = cut.Turn
	}
	t.m.bargedIn(stopped.Sub(decided))
	// The barge-in is in the trace of the turn it interrupts: under the
	// voice.playout span of the sentence it cut, else (between sentences)
	// under the latest one played, else under the turn.
	t.mu.Lock()
	var parent trace.SpanContext
	var cutPlayout trace.Span
	if po := t.playing; po != nil && cut.Sentence != "" && po.turn == turnID && po.sentence == cut.Sentence {
		cutPlayout = po.span
		parent = po.span.SpanContext()
	} else if tu := t.turns[turnID]; tu != nil {
		parent = tu.played
		if !parent.IsValid() {
			parent = tu.trace
		}
	}
	t.mu.Unlock()
	if cutPlayout != nil {
		cutPlayout.AddEvent("playout.paused", trace.WithTimestamp(stopped),
			trace.WithAttributes(attribute.Int64("alicia.played_ms", cut.Played.Milliseconds())))
	}
	_, span := tracer.Start(withParent(parent), "voice.barge_in", trace.WithTimestamp(onset))
	span.SetAttributes(attribute.String("alicia.conversation_id", t.r.cid), attribute.String("alicia.message_id", turnID),
		attribute.String("alicia.utterance_id", utterance),
		attribute.Int64("alicia.barge_in_stop_us", stopped.Sub(decided).Microseconds()),
		attribute.Int64("alicia.onset_to_stop_us", stopped.Sub(onset).Microseconds()))
	span.End(trace.WithTimestamp(stopped))
	t.r.log.Info().Str("message_id", turnID).Str("utterance_id", utterance).Dur("since_onset", stopped.Sub(onset)).Bool("ducked", ducked).
		Msg("barge-in: playout lowered until the speech has words")
	if turnID == "" {
		t.r.player.Unduck()
		t.r.player.Resume()
		return
	}
	p := &interruption{turn: turnID, cut: cut, at: stopped, onset: onset, first: utterance, span: span.SpanContext(),
		utts: map[string]time.Time{utterance: {}}, empty: map[string]bool{}, back: map[string]string{}, echo: map[string]string{}, ducked: ducked}
	t.mu.Lock()
	t.paused = p
	t.mu.Unlock()
	time.AfterFunc(pauseCap, func() { t.settle(p, true) })
}

// heard takes a Transcription from the stream: words confirm a paused
// barge-in (whichever utterance they come from: the user is talking); an
// empty final transcript of an interrupting utterance may end it.
func (t *tracker) heard(b *protocol.Transcription) {
	t.mu.Lock()
	p := t.paused
	if p == nil {
		t.mu.Unlock()
		return
	}
	lang := t.r.cfg.Language
	if b.Language != nil && *b.Language != "" {
		lang = *b.Language
	}
	_, interrupting := p.utts[b.ID]
	switch {
	case interrupting && t.r.cfg.Backchannels.Is(b.Text, lang):
		// "mm-hmm", "yeah": the answer goes on, once the utterance ends
		// without more (a later transcript with other words confirms).
		p.back[b.ID] = strings.TrimSpace(b.Text)
		t.noteBackLocked(b.ID, heardBackchannel)
	case t.echoLocked(p.turn, b.ID, b.Text):
		// The answer's own words: no interruption, whichever utterance
		// they come from.
		if interrupting {
			p.echo[b.ID] = strings.TrimSpace(b.Text)
		}
		t.noteBackLocked(b.ID, heardEcho)
	case isNotAddressed(b):
		// Hands-free: words not addressed to Alicia are no interruption;
		// once its final transcript says so, the answer goes on.
		if interrupting && b.Final {
			p.empty[b.ID] = true
			p.notAddressed = true
		}
	case strings.TrimSpace(b.Text) != "":
		delete(t.backs, b.ID)
		t.paused = nil
		t.mu.Unlock()
		t.confirm(p, b.ID)
		return
	case interrupting && b.Final:
		p.empty[b.ID] = true
	}
	t.mu.Unlock()
	t.settle(p, false)
}

// overheard is what words said over an answer were, for the final job of
// their utterance.
type overheard int

const (
	notOverheard     overheard = iota
	heardBackchannel           // only a backchannel, said over the answer being decided
	heardEcho                  // the answer's own words
)

// Overheard tells what text, the transcript of utterance said while an
// answer played, is: a backchannel over the answer being decided (barged:
// the utterance barged in), the answer's own echo, or neither. Its final
// job then makes no user message. It settles the interruption if nothing
// else is pending.
func (t *tracker) Overheard(utterance, text string, barged bool) overheard {
	t.mu.Lock()
	heard := t.backs[utterance] // known already (its speculative transcript)
	delete(t.backs, utterance)
	p := t.paused
	turn := t.current
	if p != nil {
		turn = p.turn
	}
	kind := notOverheard
	switch {
	case barged && t.r.cfg.Backchannels.Is(text, t.r.cfg.Language):
		kind = heardBackchannel
	case t.echoLocked(turn, utterance, text):
		kind = heardEcho
	}
	delete(t.echoLike, utterance)
	if kind == notOverheard || heard == kind {
		t.mu.Unlock()
		return kind
	}
	interrupting := false
	if p != nil {
		_, interrupting = p.utts[utterance]
	}
	switch {
	case kind == heardBackchannel && !interrupting:
		t.mu.Unlock()
		return notOverheard // nothing being decided: words to be answered
	case kind == heardBackchannel:
		p.back[utterance] = strings.TrimSpace(text)
	case interrupting:
		p.echo[utterance] = strings.TrimSpace(text)
	}
	t.mu.Unlock()
	if interrupting {
		t.settle(p, false)
	}
	return kind
}

// echoLocked reports whether text, the transcript of utterance, is turn's
// own words come back: at least two of them in a run of two or more of the
// answer's words in its order, and at most a third (at least one) not (a
// transcript of an echo starts and ends mid-word). The person quoting the
// answer in a sentence of their own ("no, the weather in Paris tomorrow")
// has more words of their own. One word is the answer's echo only when it
// is one of the answer's and the utterance's sound was like what was
// played (noteEchoLike): a person's own "Paris" is not.
func (t *tracker) echoLocked(turn, utterance, text string) bool {
	tu := t.turns[turn]
	if tu == nil || !tu.voiced {
		return false
	}
	var answer []string
	for _, seq := range slices.Sorted(maps.Keys(tu.sentences)) {
		answer = append(answer, words(tu.sentences[seq].text)...)
	}
	heard := words(text)
	if len(heard) == 1 && t.echoLike[utterance] {
		return slices.Contains(answer, heard[0])
	}
	return isEcho(heard, answer)
}

// noteEchoLike: utterance's sound was like what the agent played (the echo
// canceller's EchoLike), at least in part.
func (t *tracker) noteEchoLike(utterance string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.echoLike) >= maxBacks {
		for k := range t.echoLike {
			delete(t.echoLike, k)
			break
		}
	}
	t.echoLike[utterance] = true
}

// isEcho: see echoLocked.
func isEcho(heard, answer []string) bool {
	if len(heard) < 2 || len(answer) < 2 {
		return false
	}
	pairs := map[[2]string]bool{}
	for i := 0; i+1 < len(answer); i++ {
		pairs[[2]string{answer[i], answer[i+1]}] = true
	}
	covered := make([]bool, len(heard))
	for i := 0; i+1 < len(heard); i++ {
		if pairs[[2]string{heard[i], heard[i+1]}] {
			covered[i], covered[i+1] = true, true
		}
	}
	own := 0
	for _, c := range covered {
		if !c {
			own++
		}
	}
	return len(heard)-own >= 2 && own <= max(1, len(heard)/3)
}

// maxBacks bounds tracker.backs (utterances whose final job never came).
const maxBacks = 32

func (t *tracker) noteBackLocked(utterance string, kind overheard) {
	if len(t.backs) >= maxBacks {
		for k := range t.backs {
			delete(t.backs, k)
			break
		}
	}
	t.backs[utterance] = kind
}

// onSpecTranscript: a speculative transcript (core NATS, sent when the
// speech pauses) is the earliest sign of words, before the utterance has
// ended. Confirming on it puts the ControlStop and the playout records on
// the stream before the interruption's UserMessage, so its turn's history
// holds only what was heard.
func (t *tracker) onSpecTranscript(_ context.Context, _ protocol.Envelope, tr *protocol.Transcription, _ bus.Inbound) error {
	t.mu.Lock()
	paused := t.paused != nil
	t.mu.Unlock()
	if paused {
		t.heard(&protocol.Transcription{ID: tr.ID, ConversationID: tr.ConversationID, Text: tr.Text, Final: tr.Final, Addressed: tr.Addressed})
	}
	return nil
}

// interrupterEndedLocked notes the end of an utterance that barged in, and
// looks again BargeInWordsWait later.
func (t *tracker) interrupterEndedLocked(utterance string, at time.Time) {
	p := t.paused
	if p == nil {
		return
	}
	if _, ok := p.utts[utterance]; !ok {
		return
	}
	p.utts[utterance] = at
	_, back := p.back[utterance]
	_, echo := p.echo[utterance]
	if back || echo {
		go t.settle(p, false) // its words are known: no need to wait for more
	}
	time.AfterFunc(t.r.cfg.BargeInWordsWait, func() { t.settle(p, false) })
}

// settle resumes p's playout when every interrupting utterance has ended
// without words: its final transcript came empty, or none came within
// BargeInWordsWait. force: the pause has lasted pauseCap.
func (t *tracker) settle(p *interruption, force bool) {
	t.mu.Lock()
	if t.paused != p {
		t.mu.Unlock()
		return // confirmed or settled already
	}
	now := time.Now()
	for id, ended := range p.utts {
		if force {
			break
		}
		_, back := p.back[id]
		_, echo := p.echo[id]
		if ended.IsZero() || !p.empty[id] && !back && !echo && now.Sub(ended) < t.r.cfg.BargeInWordsWait {
			t.mu.Unlock()
			return // still speaking, or its words may yet come
		}
	}
	t.paused = nil
	t.mu.Unlock()
	t.resume(p, now)
}

// resume: a false interruption or a backchannel. The answer goes back to
// its level (a paused one goes on from the start of the sentence the pause
// cut), and a TurnEvent records it (no row).
func (t *tracker) resume(p *interruption, now time.Time) {
	if t.r.ctx.Err() != nil {
		return
	}
	if p.ducked {
		t.r.player.Unduck()
	} else {
		t.r.player.Resume()
	}
	held := now.Sub(p.at)
	cid := t.r.cid
	ev := &protocol.TurnEvent{ConversationID: cid, Kind: protocol.TurnEventKindFalseInterruption, UtteranceID: &p.first,
		MessageID: &p.turn, Reason: protocol.Ptr("no_words"), HeldMs: protocol.Ptr(int32(held / time.Millisecond)), Timestamp: now.UnixMilli()}
	if len(p.back) > 0 {
		// What was said, in the order the utterances began (the first one first).
		said := []string{}
		if w, ok := p.back[p.first]; ok {
			said = append(said, w)
		}
		for id, w := range p.back {
			if id != p.first {
				said = append(said, w)
			}
		}
		ev.Kind, ev.Reason, ev.Transcript = protocol.TurnEventKindBackchannel, protocol.Ptr("backchannel"), protocol.Ptr(strings.Join(said, " "))
		t.m.backchannel(held)
		t.r.log.Info().Str("message_id", p.turn).Str("utterance_id", p.first).Dur("held", held).Str("said", *ev.Transcript).
			Msg("backchannel: the answer goes on")
	} else if len(p.echo) > 0 {
		said := []string{}
		if w, ok := p.echo[p.first]; ok {
			said = append(said, w)
		}
		for id, w := range p.echo {
			if id != p.first {
				said = append(said, w)
			}
		}
		ev.Reason, ev.Transcript = protocol.Ptr("echo"), protocol.Ptr(strings.Join(said, " "))
		t.m.falseInterruption()
		t.m.echo(held)
		t.r.log.Info().Str("message_id", p.turn).Str("utterance_id", p.first).Dur("held", held).Str("heard", *ev.Transcript).
			Msg("the answer's own echo: the answer goes on")
	} else if p.notAddressed {
		// Hands-free speech not addressed to Alicia leaves no record.
		t.m.falseInterruption()
		t.r.log.Info().Str("message_id", p.turn).Dur("held", held).Msg("hands-free: speech not addressed over the answer; playout resumed")
		return
	} else {
		t.m.falseInterruption()
		t.r.log.Info().Str("message_id", p.turn).Str("utterance_id", p.first).Dur("held", held).
			Msg("false interruption: no words; playout resumed")
	}
	if p.cut.Sentence != "" {
		ev.SentenceID = &p.cut.Sentence
	}
	env := protocol.New(cid, ev)
	t.enqueue(func(ctx context.Context) {
		if _, err := t.r.pub.PublishAgent(withSpan(ctx, p.span), env, cid+":fi:"+p.first); err != nil {
			t.r.log.Error().Err(err).Msg("publish TurnEvent false_interruption")
		}
	})
}

// confirm: the interruption has words. The paused answer is dropped:
// ControlStop (speech) goes out so every service drops the turn, and what
// was played is recorded.
func (t *tracker) confirm(p *interruption, by string) {
	st := t.r.player.Stop(p.turn)
	if p.ducked {
		// The answer played on, lowered, up to now: that is what was heard.
		p.cut = st
		p.cut.Turn = p.turn
	}
	now := time.Now()
	t.m.confirmed(time.Since(p.at))
	t.r.log.Info().Str("message_id", p.turn).Str("utterance_id", by).Dur("paused", time.Since(p.at)).Msg("barge-in confirmed: answer stopped")
	turnID, cut := p.turn, p.cut
	cid := t.r.cid
	stop := protocol.New(cid, &protocol.ControlStop{ConversationID: cid, TargetID: &turnID,
		StopType: protocol.Ptr(protocol.ControlStopStopTypeSpeech), Reason: protocol.Ptr("barge-in")})
	stop.Meta = map[string]any{edge.MetaUserID: t.r.userOr("")}
	var playedSpan trace.SpanContext // the cut sentence's voice.playout span
	if cut.Sentence != "" {
		playedSpan = t.endPlayout(turnID, cut.Sentence, protocol.SentencePlayoutStatusInterrupted, cut.Played, now)
	}
	t.mu.Lock()
	tu := t.turnLocked(turnID)
	tu.stopped = true
	turnSpan := tu.trace
	var recs []*sentence
	var interrupted *sentence
	for _, s := range tu.sentences {
		if s.recorded {
			continue
		}
		s.recorded = true
		if s.id == cut.Sentence {
			interrupted = s
		} else {
			recs = append(recs, s)
		}
	}
	t.mu.Unlock()
	t.enqueue(func(ctx context.Context) {
		if _, err := t.r.pub.PublishOnBehalf(withSpan(ctx, p.span), stop, "stop:"+turnID); err != nil {
			t.r.log.Error().Err(err).Msg("publish ControlStop")
		}
	})
	if interrupted != nil {
		t.record(turnID, interrupted, protocol.SentencePlayoutStatusInterrupted, cut.Played, playedSpan)
	}
	for _, s := range recs {
		t.record(turnID, s, protocol.SentencePlayoutStatusUnplayed, 0, turnSpan)
	}
}

// withSpan is ctx with span sc as its span (unchanged when sc is invalid):
// a publish from it carries sc in the envelope's meta.
func withSpan(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}
