package agent

import (
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Adaptive end of turn (vad.EndOfTurn, a heuristic): each transcript of the
// open utterance — a partial Transcription on the stream, or the
// speculative one of a pause — sets how long a silence ends it. The
// detector takes it only while no speech came after the audio the
// transcript heard, so a listener tells it how much that was.

// partialJobs remembers how much audio each partial job of the open
// utterance carried.
type partialJobs struct {
	utt   string
	bytes map[string]int // job id → utterance bytes
}

func (p *partialJobs) sent(utt, jobID string, n int) {
	if p.utt != utt || p.bytes == nil {
		p.utt, p.bytes = utt, map[string]int{}
	}
	p.bytes[jobID] = n
}

func (p *partialJobs) heard(utt, jobID string) (int, bool) {
	if p.utt != utt {
		return 0, false
	}
	n, ok := p.bytes[jobID]
	return n, ok
}

// transcriptJobID is the ASR job a Transcription on the stream answers:
// the asr publishes it with Nats-Msg-Id "{job id}:tr"
// (services/asr/internal/worker); "" when it is not there.
func transcriptJobID(h nats.Header) string {
	id, ok := strings.CutSuffix(h.Get(jetstream.MsgIDHeader), ":tr")
	if !ok {
		return ""
	}
	return id
}

// endOfTurn hands a transcript of an utterance to the listener that has it
// open: jobID is the ASR job it answers; spec, a speculative job's.
func (r *Room) endOfTurn(tr *protocol.Transcription, jobID string, spec bool) {
	if r.cfg.EndOfTurn.Off || tr.Final || tr.ID == "" || jobID == "" {
		return
	}
	r.mu.Lock()
	ls := make([]*listener, 0, len(r.listeners))
	for _, l := range r.listeners {
		ls = append(ls, l)
	}
	r.mu.Unlock()
	for _, l := range ls {
		l.transcript(tr, jobID, spec)
	}
}

// transcript sets the end-of-turn silence of the open utterance from a
// transcript of it. A partial job's transcript heard the audio that job
// carried; a speculative one's, everything so far (had the user spoken
// again, the speculation would have been dropped).
func (l *listener) transcript(tr *protocol.Transcription, jobID string, spec bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.utt == "" || tr.ID != l.utt {
		return
	}
	heard := -1
	if spec {
		if l.spec == nil || l.spec.jobID != jobID {
			return
		}
	} else {
		n, ok := l.partials.heard(l.utt, jobID)
		if !ok {
			return // what it heard is unknown: a stale transcript could end the turn early
		}
		heard = n
	}
	lang := l.r.cfg.Language
	if tr.Language != nil && *tr.Language != "" {
		lang = *tr.Language
	}
	l.det.SetEndSilence(l.r.cfg.EndOfTurn.Silence(tr.Text, lang), heard)
}
