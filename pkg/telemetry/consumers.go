package telemetry

import (
	"context"
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
	// stream with none exports its size only.
	Consumers map[string][]string
	Log       zerolog.Logger
	// Timeout bounds one scrape's requests to one stream (default 2 s).
	Timeout time.Duration
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
	for _, cn := range w.consumers {
		c, err := s.Consumer(ctx, cn)
		if err != nil {
			errs = append(errs, fmt.Errorf("consumer %s: %w", cn, err))
			continue
		}
		ci := c.CachedInfo()
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(ci.NumPending), name, cn)
		ch <- prometheus.MustNewConstMetric(descAckPending, prometheus.GaugeValue, float64(ci.NumAckPending), name, cn)
		ch <- prometheus.MustNewConstMetric(descRedelivered, prometheus.GaugeValue, float64(ci.NumRedelivered), name, cn)
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(ci.NumWaiting), name, cn)
	}
	return errors.Join(errs...)
}

// ConsumerLagMetrics describes the consumer-lag metrics without watching
// anything (for the metrics table of deploy/METRICS.md).
func ConsumerLagMetrics() prometheus.Collector { return &lagSet{} }
