// Package worker takes ASR jobs off the ASR_JOBS work queue — one durable
// pull consumer shared by every replica — transcribes them and publishes
// what they became: partial and final Transcriptions for the client, the
// final one's UserMessage for the llm, or an ErrorMessage; and for a
// speculative job, its transcript and the UserMessage it would become on
// core NATS (alicia.spec.{cid}.*), never on the stream.
package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/services/asr/internal/metrics"
	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
)

// Transcriber is the speech-to-text backend; whisper.Client is the real one.
type Transcriber interface {
	Transcribe(ctx context.Context, req whisper.Request) (whisper.Result, error)
}

// Deps are what a worker talks to.
type Deps struct {
	JS            jetstream.JetStream
	Jobs          jetstream.Stream // ASR_JOBS
	Conversations jetstream.Stream // CONVERSATIONS
	Publisher     *bus.Publisher
	DeadLetters   *bus.DeadLetters
	ASR           Transcriber
	// Prefs gives each conversation's language (nil: the job's).
	Prefs   *prefs.Cache
	Metrics *metrics.Metrics
	Log     zerolog.Logger
}

// Settings tune a worker.
type Settings struct {
	Consumer    string        // durable consumer name, shared by every replica
	Concurrency int           // transcriptions this replica runs at once
	AckWait     time.Duration // a job whose worker stops heartbeating goes to another replica after this
	MaxDeliver  int           // tries of one job
	// MinConfidence: a final transcript below it does not become a user message.
	MinConfidence float64
	Language      string // language hint for jobs that carry none
	Attempts      int    // tries of a final job's transcription
	// PublishTimeout bounds each publish and lookup.
	PublishTimeout time.Duration
	// PullWait is how long one pull request waits for a job (default 1s);
	// a stopping replica gives its running jobs back after at most this.
	PullWait time.Duration
}

// Worker consumes ASR jobs.
type Worker struct {
	d  Deps
	s  Settings
	mu sync.Mutex
	// cons is remade when the server lost it.
	cons jetstream.Consumer
	// partials being transcribed here, for speculative jobs to reuse.
	partials inFlight
}

// Ensure creates or updates the shared consumer and returns a worker on it.
func Ensure(ctx context.Context, d Deps, s Settings) (*Worker, error) {
	cons, err := d.Jobs.CreateOrUpdateConsumer(ctx, ConsumerConfig(s))
	if err != nil {
		return nil, err
	}
	return &Worker{d: d, s: s, cons: cons}, nil
}

// ConsumerConfig is the durable consumer every replica pulls from.
func ConsumerConfig(s Settings) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     s.Consumer,
		Description: "ASR workers: every asr replica pulls its jobs from here",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     s.AckWait,
		MaxDeliver:  s.MaxDeliver,
		// Room for every replica's pull requests.
		MaxWaiting:    4096,
		MaxAckPending: -1,
	}
}

// Run works on jobs until ctx ends, then pulls no more: jobs still running
// finish until work ends (svcmain.WorkContext: the drain after SIGTERM;
// outside a drain work is ctx), and what is left then is given back for
// another replica as soon as this one has no pull request open.
func (w *Worker) Run(ctx, work context.Context) error {
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	var (
		slots, jobs sync.WaitGroup
		mu          sync.Mutex
		held        []jetstream.Msg
	)
	hold := func(m jetstream.Msg) {
		mu.Lock()
		held = append(held, m)
		mu.Unlock()
	}
	for range max(1, w.s.Concurrency) {
		slots.Go(func() { w.slot(ctx, jobCtx, &jobs, hold) })
	}
	// Give jobs back only once every pull request of this replica has ended
	// on the server (answered, or expired after PullWait): a job handed back
	// while one was open could be delivered straight to it — a subscription
	// going away — and wait out AckWait there. Cancelling a pull on the
	// client does not withdraw it from the server.
	slots.Wait()
	for _, m := range held {
		w.settler().Settle(ctx, m, bus.GiveBack())
	}
	finished := make(chan struct{})
	go func() { jobs.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-work.Done():
		cancelJobs()
		<-finished
	}
	return nil
}

// slot pulls one job at a time: a replica holds one pull request per free
// slot, so a busy replica leaves the next job to whichever replica has room.
// A slot is free again as soon as its job's transcription is back: storing
// the results and acknowledging the job overlap the next transcription, so
// the backend (the GPU) does not wait for JetStream's fsyncs.
func (w *Worker) slot(ctx, jobCtx context.Context, jobs *sync.WaitGroup, hold func(jetstream.Msg)) {
	wait := w.s.PullWait
	if wait <= 0 {
		wait = time.Second
	}
	failures := 0
	for ctx.Err() == nil {
		// No context: a pull ends on the server's answer, never half-way.
		m, err := w.consumer().Next(jetstream.FetchMaxWait(wait))
		switch {
		case err == nil && ctx.Err() != nil:
			hold(m) // taken while stopping: given back with the others
			return
		case err == nil:
			failures = 0
			free := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(free) }) }
			jobs.Go(func() {
				defer release()
				w.handle(jobCtx, m, release)
			})
			select {
			case <-free:
			case <-ctx.Done():
				return
			}
		case ctx.Err() != nil:
			return
		case idle(err):
			failures = 0
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, nats.ErrNoResponders):
			// The server restarted with its consumers in memory, or someone
			// deleted ours: make it again.
			if cons, cerr := w.d.Jobs.CreateOrUpdateConsumer(ctx, ConsumerConfig(w.s)); cerr == nil {
				w.setConsumer(cons)
				continue
			}
			fallthrough
		default:
			failures++
			d := min(time.Duration(failures)*200*time.Millisecond, 5*time.Second)
			w.d.Log.Warn().Err(err).Dur("retry_in", d).Msg("pull failed")
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
	}
}

func (w *Worker) consumer() jetstream.Consumer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cons
}

func (w *Worker) setConsumer(c jetstream.Consumer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cons = c
}

// settler settles jobs (bus.Settler): a job given up is dead-lettered.
func (w *Worker) settler() *bus.Settler {
	return &bus.Settler{Consumer: w.s.Consumer, DeadLetters: w.d.DeadLetters, MaxDeliver: w.s.MaxDeliver, Log: w.d.Log}
}

// idle: the pull ended without a job.
func idle(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) ||
		errors.Is(err, nats.ErrTimeout) || (errors.As(err, &t) && t.Timeout())
}

// handle works on one job and settles it with the server; free is called
// once the backend is done with it.
func (w *Worker) handle(ctx context.Context, m jetstream.Msg, free func()) {
	w.d.Metrics.InFlight.Inc()
	defer w.d.Metrics.InFlight.Dec()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go bus.Heartbeat(hctx, m, w.s.AckWait) // however long the backend takes

	d := bus.DeliveryOf(m)
	log := w.d.Log.With().Str("subject", d.Subject).Uint64("seq", d.Sequence).Uint64("delivery", d.NumDelivered).Logger()
	err := bus.Protect(log, func() error { return w.work(hctx, m.Data(), d, free) })
	s := w.settler()
	o := s.Judge(ctx, err, d.NumDelivered)
	switch {
	case o.Verdict == bus.VerdictGiveBack:
		// Shutting down: another replica does the job now.
	case errors.Is(err, errDone):
		// Settled without success (reported to the client, or dropped).
		o = bus.Terminate(err)
	case o.Verdict == bus.VerdictFail:
		w.giveUp(ctx, m.Data(), d)
	}
	s.Settle(ctx, m, o)
}
