// Package metrics holds the llm's Prometheus metrics, registered once on the
// default registry (so one process running several replicas, like the dev
// launcher, shares them).
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the llm service.
type Metrics struct {
	// TurnDuration: dequeue → last envelope published, by kind
	// (message, regenerate, edit, continue) and outcome.
	TurnDuration *prometheus.HistogramVec
	// FirstToken: model request sent → first streamed token.
	FirstToken prometheus.Histogram
	// FirstSentence: dequeue → first AssistantSentence acknowledged by JetStream.
	FirstSentence prometheus.Histogram
	// Errors by reason (backend_unavailable, rejected, internal, publish, history, bad_target).
	Errors *prometheus.CounterVec
	// ToolCalls by tool and outcome (success or a ToolUseResult error code).
	ToolCalls *prometheus.CounterVec
	// ModelRequests by outcome (ok, retry, failed).
	ModelAttempts *prometheus.CounterVec
	// Preempts: answers started on a speculative transcript, by outcome
	// (used, mismatch, cancelled, expired, replaced).
	Preempts *prometheus.CounterVec
	// Breaker is the circuit breaker state: 0 closed, 1 open, 2 half-open.
	Breaker prometheus.Gauge
	// BudgetWaiting: turns waiting now because their user runs
	// ALICIA_LLM_TURNS_PER_USER turns; BudgetWait: how long a turn that
	// waited so waited; TurnsParked: turns given back to wait outside a
	// partition's window (their user holds its budget's worth there).
	BudgetWaiting prometheus.Gauge
	BudgetWait    prometheus.Histogram
	TurnsParked   prometheus.Counter
	// Judged: answers the judge ended with, by outcome (judged, unsampled,
	// skipped, malformed, rejected, unavailable); JudgeDuration: one judge
	// model request; JudgeTokens: its tokens by kind (prompt, completion).
	Judged        *prometheus.CounterVec
	JudgeDuration prometheus.Histogram
	JudgeTokens   *prometheus.CounterVec
	// Titles: conversations' titles by outcome (generated, kept, failed).
	Titles *prometheus.CounterVec
	// Demonstrations: turns' demonstration selections by outcome
	// (included, none, timeout, error); DemonstrationsDuration: how long
	// one took (bounded by ALICIA_LLM_DEMONSTRATIONS_TIMEOUT).
	Demonstrations         *prometheus.CounterVec
	DemonstrationsDuration prometheus.Histogram
	// Timers: set by a tool (by kind), cancelled by a tool, delivered by
	// this replica (by how: spoken, message) and how late, deliveries that
	// failed (retried), and the scheduled timers the replica knows.
	TimersSet       *prometheus.CounterVec
	TimersCancelled prometheus.Counter
	TimersDelivered *prometheus.CounterVec
	TimerLateness   prometheus.Histogram
	TimersFailed    prometheus.Counter
	TimersScheduled prometheus.Gauge
}

var (
	once sync.Once
	def  *Metrics
)

// Default returns the metrics registered on prometheus.DefaultRegisterer.
func Default() *Metrics {
	once.Do(func() {
		buckets := []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
		def = &Metrics{
			TurnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "turn_duration_seconds",
				Help: "Time from taking a turn to its last envelope.", Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"kind", "outcome"}),
			FirstToken: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "time_to_first_token_seconds",
				Help: "Time from sending a model request to its first streamed token.", Buckets: buckets}),
			FirstSentence: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "time_to_first_sentence_seconds",
				Help: "Time from taking a turn to its first sentence stored in JetStream.", Buckets: buckets}),
			Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "errors_total",
				Help: "Turn errors by reason."}, []string{"reason"}),
			ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "tool_calls_total",
				Help: "Tool calls by tool and outcome."}, []string{"tool", "outcome"}),
			ModelAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "model_requests_total",
				Help: "Model requests by outcome."}, []string{"outcome"}),
			Breaker: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "llm", Name: "breaker_state",
				Help: "Model backend circuit breaker: 0 closed, 1 open, 2 half-open."}),
		}
		def.Preempts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "preempts_total",
			Help: "Answers started on a speculative transcript during the end-of-turn silence, by outcome: used (the turn confirmed it), mismatch (the confirmed turn's request differed), cancelled (the user spoke again), expired, replaced."}, []string{"outcome"})
		def.BudgetWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "llm", Name: "turns_waiting_budget",
			Help: "Turns waiting because their user runs ALICIA_LLM_TURNS_PER_USER turns at once (over every replica)."})
		def.BudgetWait = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "budget_wait_seconds",
			Help: "How long a turn waited for its user's budget of turns at once before it started.", Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}})
		def.TurnsParked = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "turns_parked_total",
			Help: "Turns given back to the queue to wait (their user holds its budget's worth of turns in the partition)."})
		prometheus.DefaultRegisterer.MustRegister(def.BudgetWaiting, def.BudgetWait, def.TurnsParked)
		def.Judged = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "judged_total",
			Help: "Answers the judge is done with, by outcome: judged (a TurnJudgement published), unsampled (outside ALICIA_JUDGE_SAMPLE), skipped (failed, interrupted or no question), malformed (two replies not the JSON asked for), rejected (4xx), unavailable (the judge backend failed every delivery)."}, []string{"outcome"})
		def.JudgeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "judge_request_duration_seconds",
			Help: "Time of one judge model request.", Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}})
		def.JudgeTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "judge_tokens_total",
			Help: "Tokens of the judge model's requests, by kind (prompt, completion), as its backend reports them."}, []string{"kind"})
		prometheus.DefaultRegisterer.MustRegister(def.Judged, def.JudgeDuration, def.JudgeTokens)
		def.Titles = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "titles_total",
			Help: "Conversation titles asked of the model after an answer, by outcome: generated (a ConversationUpdate published), kept (the model kept the title, or gave the same), failed (no title after the last try)."}, []string{"outcome"})
		prometheus.DefaultRegisterer.MustRegister(def.Titles)
		def.Demonstrations = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "demonstrations_total",
			Help: "Turns' choices of demonstrations (the person's earlier well-rated turns shown as examples), by outcome: included, none (nothing qualified), timeout (over ALICIA_LLM_DEMONSTRATIONS_TIMEOUT), error; the turn goes on without them on timeout or error."}, []string{"outcome"})
		def.DemonstrationsDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "demonstrations_duration_seconds",
			Help: "Time to choose a turn's demonstrations (Postgres full-text search over the person's rated turns).", Buckets: buckets})
		prometheus.DefaultRegisterer.MustRegister(def.Demonstrations, def.DemonstrationsDuration)
		def.TimersSet = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "timers_set_total",
			Help: "Timers and reminders set by the model's tools, by kind (timer, reminder)."}, []string{"kind"})
		def.TimersCancelled = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "timers_cancelled_total",
			Help: "Timers and reminders cancelled by the model's cancel_timer tool (not those the person cancels in the web app: DELETE /v1/timers/{id} at the gateway)."})
		def.TimersDelivered = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "timers_delivered_total",
			Help: "Timers and reminders this replica delivered, by how: spoken (a call was open) or message."}, []string{"as"})
		def.TimerLateness = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "llm", Name: "timers_lateness_seconds",
			Help:    "Due time to the delivered message published, per timer this replica delivered (a timer due while every replica was down counts its downtime).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}})
		def.TimersFailed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "llm", Name: "timers_failed_total",
			Help: "Timer deliveries or claims that failed and are tried again."})
		def.TimersScheduled = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "llm", Name: "timers_scheduled",
			Help: "Scheduled timers and reminders this replica knows (every replica knows them all)."})
		prometheus.DefaultRegisterer.MustRegister(def.TimersSet, def.TimersCancelled, def.TimersDelivered, def.TimerLateness, def.TimersFailed, def.TimersScheduled)
		prometheus.DefaultRegisterer.MustRegister(def.TurnDuration, def.FirstToken, def.FirstSentence, def.Errors, def.ToolCalls, def.ModelAttempts, def.Breaker, def.Preempts)
	})
	return def
}
