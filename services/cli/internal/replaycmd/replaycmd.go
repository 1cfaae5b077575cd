// Package replaycmd implements `alicia replay <conversation>`: a timeline of
// one conversation read back from JetStream.
package replaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/timeline"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// Options of a replay.
type Options struct {
	ConversationID string
	JSON           bool // one JSON object per line instead of the table
	Follow         bool // keep printing new envelopes until ctx ends
	FromStanza     int32
}

// Step is one line of the timeline.
type Step = timeline.Step

// Run prints the conversation's timeline to out.
func Run(ctx context.Context, nc *nats.Conn, o Options, out io.Writer) error {
	if err := subjects.Validate(o.ConversationID); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	p := &printer{o: o, out: out, tl: timeline.Timeline{Envelopes: o.JSON}}
	if !o.JSON {
		fmt.Fprintf(out, "%10s  %7s  %-6s  %-20s  %s\n", "offset", "gap", "origin", "type", "summary")
	}
	from := bus.SequenceOfStanza(o.FromStanza) + 1
	err := bus.Replay(ctx, nc, bus.StreamConversations, subjects.Conversation(o.ConversationID), from, func(m bus.Stored) error {
		return p.print(m.Sequence, m.Subject, m.Time, m.Data)
	})
	if err != nil {
		return err
	}
	if !o.Follow {
		if p.count == 0 {
			return fmt.Errorf("replay: conversation %s has no envelopes in %s", o.ConversationID, bus.StreamConversations)
		}
		return nil
	}
	return p.follow(ctx, nc)
}

type printer struct {
	o     Options
	out   io.Writer
	tl    timeline.Timeline
	last  uint64
	count int
}

func (p *printer) print(seq uint64, subject string, at time.Time, data []byte) error {
	st := p.tl.Step(seq, subject, at, data)
	p.last = seq
	p.count++
	if p.o.JSON {
		b, _ := json.Marshal(st)
		_, err := fmt.Fprintf(p.out, "%s\n", b)
		return err
	}
	summary := st.Summary
	if st.Error != "" {
		summary = st.Error
	}
	_, err := fmt.Fprintf(p.out, "%9.3fs  %6dms  %-6s  %-20s  %s\n", float64(st.OffsetMs)/1000, st.GapMs, st.Origin, style.Printable(st.Type), style.Printable(summary))
	return err
}

// follow prints envelopes published after the replay until ctx ends.
func (p *printer) follow(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.Conversation(p.o.ConversationID)}}
	if p.last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, p.last+1
	} else {
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	cons, err := js.OrderedConsumer(ctx, bus.StreamConversations, cfg)
	if err != nil {
		return fmt.Errorf("replay: follow: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("replay: follow: %w", err)
	}
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("replay: follow: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if err := p.print(md.Sequence.Stream, m.Subject(), md.Timestamp, m.Data()); err != nil {
			return err
		}
	}
}
