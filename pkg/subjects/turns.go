package subjects

import (
	"fmt"
	"strconv"
	"strings"
)

// Turn-queue subjects (stream LLM_TURNS, services/llm): client envelopes
// that start a turn, copied from CONVERSATIONS by a subject transform that
// puts each conversation in one of P partitions:
//
//	alicia.turns.{partition}.{cid}.{type}
const AllTurns = "alicia.turns.>"

// TurnPartition matches every turn envelope of partition k.
func TurnPartition(k int) string { return root + ".turns." + strconv.Itoa(k) + ".>" }

// TurnTransform is the destination of the subject transform that copies
// AllOfType(OriginClient, t) into the turn queue: the conversation id
// (wildcard 1 of the source) is hashed into one of p partitions.
func TurnTransform(p int, t Typed) string {
	return fmt.Sprintf("%s.turns.{{partition(%d,1)}}.{{wildcard(1)}}.%s", root, p, t.Token())
}

// Turn is the subject of a turn envelope of type t of conversation cid in
// partition k, as the transform writes it.
func Turn[C ~string](k int, cid C, t Typed) string {
	return root + ".turns." + strconv.Itoa(k) + "." + string(cid) + "." + t.Token()
}

// ParsedTurn is a turn-queue subject taken apart.
type ParsedTurn struct {
	Partition      int
	ConversationID string
	TypeToken      string
}

// ParseTurn splits alicia.turns.{k}.{cid}.{type}.
func ParseTurn(subject string) (ParsedTurn, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 || parts[0] != root || parts[1] != "turns" {
		return ParsedTurn{}, fmt.Errorf("%w: %q is not a turn subject", ErrInvalid, subject)
	}
	k, err := strconv.Atoi(parts[2])
	if err != nil || k < 0 {
		return ParsedTurn{}, fmt.Errorf("%w: %q has partition %q", ErrInvalid, subject, parts[2])
	}
	if !ValidToken(parts[3]) || !ValidToken(parts[4]) {
		return ParsedTurn{}, fmt.Errorf("%w: %q has an empty token", ErrInvalid, subject)
	}
	return ParsedTurn{Partition: k, ConversationID: parts[3], TypeToken: parts[4]}, nil
}
