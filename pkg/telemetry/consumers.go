package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// ConsumerLag exports, on every scrape, the state of the JetStream durable
// consumers a service reads from: how far behind it is (pending), what it
// holds unacknowledged, what was delivered again, and the size of the
// streams behind them. The figures come from the server (stream and
// consumer info, which every service's NATS user may read for its own
// consumers), so they hold while the service is stuck or slow, which is
// when they matter.
type ConsumerLag struct {
	JS jetstream.JetStream
	// Consumers lists, by stream, the service's durable consumers; a
	// stream with none exports its size only. Each is exported under its
	// ConsumerLabel: a name from InstanceConsumer without its random token.
	Consumers map[string][]string
	Log       zerolog.Logger
	// Timeout bounds one scrape's requests to one stream (default 2 s).
	Timeout time.Duration
}

// InstanceTokenLen is how many lowercase hex digits end the name of an
// instance's own consumer (InstanceConsumer).
const InstanceTokenLen = 16

// NewInstanceToken is InstanceTokenLen random lowercase hex digits.
func NewInstanceToken() string {
	b := make([]byte, InstanceTokenLen/2)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// ValidInstanceToken reports whether token is InstanceTokenLen lowercase
// hex digits, as NewInstanceToken makes.
func ValidInstanceToken(token string) bool {
	if len(token) != InstanceTokenLen {
		return false
	}
	for i := range len(token) {
		if c := token[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// instanceLabels maps each name InstanceConsumer made in this process to
// its label: the consumer-lag collector and the service whose consumer it
// is always share the process (a service exports its own consumers).
var instanceLabels sync.Map // string → string

// InstanceConsumer names a durable consumer that one instance of a
// service owns alone: base-instance-token, token from NewInstanceToken
// (persistence's: natsauth.PersistenceConsumer-<instance>-<token>, random
// per process so that no other service can name it). The name changes at
// every restart; the consumer-lag metrics export it under
// ConsumerLabel(name), base-instance, which does not.
//
// Only a token that is ValidInstanceToken is stripped from the label; with
// any other, the label is the whole name.
func InstanceConsumer(base, instance, token string) string {
	name := base + "-" + instance + "-" + token
	if ValidInstanceToken(token) {
		instanceLabels.Store(name, base+"-"+instance)
	}
	return name
}

// ConsumerLabel is the `consumer` label of the consumer-lag metrics for
// the consumer named name. The rule: a name that InstanceConsumer made in
// this process loses its trailing "-" and InstanceTokenLen lowercase hex
// digits (persistence-<instance>-<token> is exported as
// persistence-<instance>); every other name is its own label, whatever it
// looks like (another service's consumer ending in 16 hex digits keeps
// them).
//
// Two live consumers of one stream with the same label (two persistence
// instances of the same name in one process) are not added together, nor
// exported under one label in turn: the collector exports the one furthest
// behind (the most pending messages; on a tie, the first by name) and logs
// a warning naming both.
func ConsumerLabel(name string) string {
	if l, ok := instanceLabels.Load(name); ok {
		return l.(string)
	}
	return name
}

var (
	descPending = prometheus.NewDesc("alicia_jetstream_consumer_pending_messages",
		"Messages of the stream not yet delivered to the consumer (its lag).", []string{"stream", "consumer"}, nil)
	descAckPending = prometheus.NewDesc("alicia_jetstream_consumer_ack_pending_messages",
		"Messages delivered to the consumer and not acknowledged yet.", []string{"stream", "consumer"}, nil)
	descRedelivered = prometheus.NewDesc("alicia_jetstream_consumer_redelivered_messages",
		"Messages delivered more than once and not acknowledged yet.", []string{"stream", "consumer"}, nil)
	descWaiting = prometheus.NewDesc("alicia_jetstream_consumer_waiting_pulls",
		"Pull requests waiting on the server: how many fetches of the service's workers are idle.", []string{"stream", "consumer"}, nil)
	descStreamMsgs = prometheus.NewDesc("alicia_jetstream_stream_messages",
		"Messages stored in the stream.", []string{"stream"}, nil)
	descStreamBytes = prometheus.NewDesc("alicia_jetstream_stream_bytes",
		"Bytes stored in the stream.", []string{"stream"}, nil)
	descScrapeErrors = prometheus.NewDesc("alicia_jetstream_scrape_errors",
		"1 when the last scrape could not read a stream's or a consumer's state from the server, else 0.", []string{"stream"}, nil)
)

// lagSet is the one collector on the default registry: the services of a
// process (`alicia up` runs them all in one) each add their ConsumerLag,
// and a stream two of them read is read and exported once.
type lagSet struct {
	mu      sync.Mutex
	members map[*ConsumerLag]struct{}
}

var (
	lagMu  sync.Mutex
	lagAll *lagSet
)

// RegisterConsumerLag exports c's consumers on the default registry until
// remove is called (when the service stops).
func RegisterConsumerLag(c *ConsumerLag) (remove func(), err error) {
	lagMu.Lock()
	defer lagMu.Unlock()
	if lagAll == nil {
		set := &lagSet{members: map[*ConsumerLag]struct{}{}}
		if err := prometheus.DefaultRegisterer.Register(set); err != nil {
			return nil, err
		}
		lagAll = set
	}
	set := lagAll
	set.mu.Lock()
	set.members[c] = struct{}{}
	set.mu.Unlock()
	return func() {
		set.mu.Lock()
		delete(set.members, c)
		set.mu.Unlock()
	}, nil
}

// Describe implements prometheus.Collector.
func (s *lagSet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descAckPending, descRedelivered, descWaiting, descStreamMsgs, descStreamBytes, descScrapeErrors} {
		ch <- d
	}
}

// streamWatch is what the members ask of one stream.
type streamWatch struct {
	js        jetstream.JetStream
	log       zerolog.Logger
	timeout   time.Duration
	consumers []string
}

// Collect implements prometheus.Collector.
func (s *lagSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	var order []string
	watch := map[string]*streamWatch{}
	for c := range s.members {
		for name, consumers := range c.Consumers {
			w := watch[name]
			if w == nil {
				w = &streamWatch{js: c.JS, log: c.Log, timeout: c.Timeout}
				watch[name] = w
				order = append(order, name)
			}
			for _, n := range consumers {
				if !slices.Contains(w.consumers, n) {
					w.consumers = append(w.consumers, n)
				}
			}
		}
	}
	s.mu.Unlock()
	slices.Sort(order)
	for _, name := range order {
		w := watch[name]
		timeout := w.timeout
		if timeout <= 0 {
			timeout = 2 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		failed := 0.0
		if err := w.collect(ctx, name, ch); err != nil {
			failed = 1
			w.log.Warn().Err(err).Str("stream", name).Msg("consumer lag: reading the stream's state")
		}
		cancel()
		ch <- prometheus.MustNewConstMetric(descScrapeErrors, prometheus.GaugeValue, failed, name)
	}
}

// collect reads the stream's state and each consumer's. A consumer that
// is missing (being created again, deleted) is an error of the scrape and
// exports nothing, rather than a lag of 0.
func (w *streamWatch) collect(ctx context.Context, name string, ch chan<- prometheus.Metric) error {
	s, err := w.js.Stream(ctx, name)
	if err != nil {
		return err
	}
	si := s.CachedInfo()
	ch <- prometheus.MustNewConstMetric(descStreamMsgs, prometheus.GaugeValue, float64(si.State.Msgs), name)
	ch <- prometheus.MustNewConstMetric(descStreamBytes, prometheus.GaugeValue, float64(si.State.Bytes), name)
	var errs []error
	slices.Sort(w.consumers)
	// Each consumer's state under its label (ConsumerLabel); of two with
	// one label, the one furthest behind, the first by name on a tie.
	chosen := map[string]*jetstream.ConsumerInfo{}
	sharing := map[string][]string{}
	var labels []string
	for _, cn := range w.consumers {
		c, err := s.Consumer(ctx, cn)
		if err != nil {
			errs = append(errs, fmt.Errorf("consumer %s: %w", cn, err))
			continue
		}
		ci := c.CachedInfo()
		label := ConsumerLabel(cn)
		prev, seen := chosen[label]
		if !seen {
			labels = append(labels, label)
		}
		sharing[label] = append(sharing[label], cn)
		if !seen || ci.NumPending > prev.NumPending {
			chosen[label] = ci
		}
	}
	slices.Sort(labels)
	for _, label := range labels {
		ci := chosen[label]
		if names := sharing[label]; len(names) > 1 {
			w.log.Warn().Str("stream", name).Str("consumer", label).Strs("consumers", names).Str("exported", ci.Name).
				Msg("consumer lag: consumers sharing one label; the one with the most pending messages is exported")
		}
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(ci.NumPending), name, label)
		ch <- prometheus.MustNewConstMetric(descAckPending, prometheus.GaugeValue, float64(ci.NumAckPending), name, label)
		ch <- prometheus.MustNewConstMetric(descRedelivered, prometheus.GaugeValue, float64(ci.NumRedelivered), name, label)
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(ci.NumWaiting), name, label)
	}
	return errors.Join(errs...)
}

// ConsumerLagMetrics describes the consumer-lag metrics without watching
// anything (for the metrics table of deploy/METRICS.md).
func ConsumerLagMetrics() prometheus.Collector { return &lagSet{} }
