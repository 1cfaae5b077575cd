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

// clientFeatures is what a conversation's client asked for.
type clientFeatures struct {
	// streaming: AssistantSentences as they are ready (else one
	// AssistantMessage at the end).
	streaming bool
	// audioOutput: the answer is also spoken (StartAnswer answerType
	// text+voice).
	audioOutput bool
}

// defaultFeatures are a client's that sent no Configuration, or one
// without a features list: streamed text.
var defaultFeatures = clientFeatures{streaming: true}

// features caches, per conversation, the client's features: from the
// conversation's last Configuration envelope, read from CONVERSATIONS and
// forgotten when a new Configuration arrives.
type features struct {
	stream jetstream.Stream
	mu     sync.Mutex
	cache  map[string]clientFeatures
}

const maxCachedConversations = 20000

func newFeatures(stream jetstream.Stream) *features {
	return &features{stream: stream, cache: map[string]clientFeatures{}}
}

// get returns cid's client features. No Configuration, or one without a
// features list: streaming, no audio. A features list: exactly what it
// names ("streaming", "audio_output").
func (f *features) get(ctx context.Context, cid string) (clientFeatures, error) {
	f.mu.Lock()
	v, ok := f.cache[cid]
	f.mu.Unlock()
	if ok {
		return v, nil
	}
	v = defaultFeatures
	msg, err := f.stream.GetLastMsgForSubject(ctx, subjects.Client(cid, protocol.TypeConfiguration))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return defaultFeatures, err
	default:
		env, err := protocol.Decode(msg.Data)
		if err != nil {
			break // an invalid Configuration asks for nothing: keep the default
		}
		if c, ok := env.Body.(*protocol.Configuration); ok && c.Features != nil {
			v = clientFeatures{
				streaming:   slices.Contains(c.Features, protocol.ConfigurationFeaturesElemStreaming),
				audioOutput: slices.Contains(c.Features, protocol.ConfigurationFeaturesElemAudioOutput),
			}
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

// answerType is the StartAnswer answerType for these features.
func (c clientFeatures) answerType() protocol.StartAnswerAnswerType {
	if c.audioOutput {
		return protocol.StartAnswerAnswerTypeTextVoice
	}
	return protocol.StartAnswerAnswerTypeText
}
