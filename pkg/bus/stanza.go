package bus

import (
	"fmt"
	"math"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// ServerStanzaID is the stanza id the edges stamp on a server envelope: the
// negated CONVERSATIONS stream sequence, the same whichever edge delivers it.
func ServerStanzaID(streamSeq uint64) (int32, error) {
	if streamSeq == 0 || streamSeq > math.MaxInt32 {
		return 0, fmt.Errorf("bus: stream sequence %d does not fit a stanza id", streamSeq)
	}
	return -int32(streamSeq), nil
}

// SequenceOfStanza returns the stream sequence behind a server stanza id (≤ 0).
func SequenceOfStanza(id int32) uint64 {
	if id >= 0 {
		return 0
	}
	return uint64(-int64(id))
}

// StampServer sets env's stanza id from the stream sequence it was stored at.
func StampServer(env *protocol.Envelope, streamSeq uint64) error {
	id, err := ServerStanzaID(streamSeq)
	if err != nil {
		return err
	}
	env.StanzaID = id
	return nil
}
