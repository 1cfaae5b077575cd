package turn

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// features caches, per conversation, whether the client asked for streamed
// sentences: from the conversation's last Configuration envelope, read from
// CONVERSATIONS and forgotten when a new Configuration arrives.
type features struct {
	stream jetstream.Stream
	mu     sync.Mutex
	cache  map[string]bool
}

const maxCachedConversations = 20000

func newFeatures(stream jetstream.Stream) *features {
	return &features{stream: stream, cache: map[string]bool{}}
}

// streaming reports whether cid's client wants AssistantSentences. No
// Configuration, or one without a features list: yes. A features list
// without "streaming": one AssistantMessage instead.
func (f *features) streaming(ctx context.Context, cid string) (bool, error) {
	f.mu.Lock()
	v, ok := f.cache[cid]
	f.mu.Unlock()
	if ok {
		return v, nil
	}
	v = true
	msg, err := f.stream.GetLastMsgForSubject(ctx, subjects.Client(cid, protocol.TypeConfiguration))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return true, err
	default:
		env, err := protocol.Decode(msg.Data)
		if err != nil {
			break // an invalid Configuration asks for nothing: keep the default
		}
		if c, ok := env.Body.(*protocol.Configuration); ok && c.Features != nil {
			v = slices.Contains(c.Features, protocol.ConfigurationFeaturesElemStreaming)
		}
	}
	f.mu.Lock()
	if len(f.cache) >= maxCachedConversations {
		clear(f.cache)
	}
	f.cache[cid] = v
	f.mu.Unlock()
	return v, nil
}

func (f *features) forget(cid string) {
	f.mu.Lock()
	delete(f.cache, cid)
	f.mu.Unlock()
}
