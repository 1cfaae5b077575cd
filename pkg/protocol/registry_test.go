package protocol_test

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

func TestRegistryMatchesSchemas(t *testing.T) {
	files, err := fs.Glob(protoschemas.FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[protocol.MessageType]bool{}
	for _, f := range files {
		if f == "envelope.json" {
			continue
		}
		t.Run(f, func(t *testing.T) {
			raw, _ := protoschemas.FS.ReadFile(f)
			var doc struct {
				ID    string `json:"$id"`
				Title string `json:"title"`
				Type  int    `json:"x-alicia-type"`
				Token string `json:"x-alicia-token"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			mt := protocol.MessageType(doc.Type)
			if !mt.Known() {
				t.Fatalf("x-alicia-type %d is not in the registry", doc.Type)
			}
			seen[mt] = true
			token := strings.TrimSuffix(f, ".json")
			if mt.Token() != token || doc.Token != token || mt.String() != doc.Title || doc.ID != protoschemas.BaseURL+f {
				t.Errorf("registry %d = %s/%s, schema says %s/%s (%s)", mt, mt, mt.Token(), doc.Title, doc.Token, doc.ID)
			}
			if got, ok := protocol.TypeFromToken(token); !ok || got != mt {
				t.Errorf("TypeFromToken(%q) = %v, %v", token, got, ok)
			}
			body := protocol.NewBody(mt)
			if body == nil || body.MessageType() != mt {
				t.Errorf("NewBody(%d) = %T", mt, body)
			}
		})
	}
	for _, mt := range protocol.Types() {
		if !seen[mt] {
			t.Errorf("%s has no schema file", mt)
		}
	}
	// proto-schemas/PROTOCOL.md lists 31; 60-75 are the internal ones (proto-schemas/README.md).
	if len(protocol.Types()) != 47 {
		t.Errorf("%d types, want 31 of PROTOCOL.md + 16 internal", len(protocol.Types()))
	}
}

func TestMessageTypeNames(t *testing.T) {
	cases := []struct {
		t           protocol.MessageType
		name, token string
		known       bool
	}{
		{protocol.TypeErrorMessage, "ErrorMessage", "error_message", true},
		{protocol.TypeAssistantSentence, "AssistantSentence", "assistant_sentence", true},
		{protocol.TypeBranchUpdate, "BranchUpdate", "branch_update", true},
		{19, "MessageType(19)", "type_19", false},
		{45, "MessageType(45)", "type_45", false},
	}
	for _, tc := range cases {
		t.Run(tc.token, func(t *testing.T) {
			if tc.t.String() != tc.name || tc.t.Token() != tc.token || tc.t.Known() != tc.known {
				t.Errorf("%d: %s %s %v", tc.t, tc.t, tc.t.Token(), tc.t.Known())
			}
		})
	}
	if _, ok := protocol.TypeFromToken("type_19"); ok {
		t.Error("TypeFromToken accepted an unknown token")
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^am_[0-9A-Za-z]{20}$`)
	var ids []string
	for range 1000 {
		id := protocol.NewID("am")
		if !re.MatchString(id) {
			t.Fatalf("bad id %q", id)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 1000 {
		t.Error("duplicate ids")
	}
}

func TestSendersFromSchemas(t *testing.T) {
	client := map[protocol.MessageType]bool{}
	for _, typ := range protocol.Types() {
		if len(typ.Senders()) == 0 {
			t.Errorf("%s: no senders", typ)
		}
		if typ.ClientMaySend() {
			client[typ] = true
		}
		if typ.Internal() && typ.ClientMaySend() {
			t.Errorf("%s is internal but a client may send it", typ)
		}
	}
	for _, typ := range []protocol.MessageType{protocol.TypeUserMessage, protocol.TypeConfiguration, protocol.TypeToolUseResult,
		protocol.TypeFeedback, protocol.TypeUserNote, protocol.TypeMemoryAction, protocol.TypeControlStop, protocol.TypeControlVariation} {
		if !client[typ] {
			t.Errorf("%s: a client may not send it", typ)
		}
	}
	for _, typ := range []protocol.MessageType{protocol.TypeAssistantSentence, protocol.TypeAssistantMessage, protocol.TypeStartAnswer,
		protocol.TypeReasoningStep, protocol.TypeMemoryTrace, protocol.TypeToolUseRequest, protocol.TypeConversationUpdate,
		protocol.TypeErrorMessage, protocol.TypeBranchUpdate, protocol.TypeTranscription} {
		if client[typ] {
			t.Errorf("%s: a client may send it", typ)
		}
	}
}
