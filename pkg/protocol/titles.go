package protocol

// Where a conversation's title comes from, in a ConversationUpdate's meta
// (MetaTitleSource): persistence keeps the person's, lets a generated
// title replace a client's provisional one or an earlier generated one,
// and a provisional one only a provisional one (migrations 00014).
const (
	MetaTitleSource = "alicia.title_source"
	// TitlePerson: set by the person (a rename, a title given when the
	// conversation was created); also when MetaTitleSource is absent.
	TitlePerson = "person"
	// TitleProvisional: a client's placeholder (the first words of the
	// first message) that a generated title replaces.
	TitleProvisional = "provisional"
	// TitleGenerated: the llm's, from the conversation's content.
	TitleGenerated = "generated"
)
