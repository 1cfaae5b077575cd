package sentence_test

import (
	"reflect"
	"testing"

	"github.com/alicia-voice/alicia/pkg/sentence"
)

// feed pushes the chunks and flushes, returning every sentence emitted.
func feed(s *sentence.Splitter, chunks []string) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, s.Push(c)...)
	}
	return append(out, s.Flush()...)
}

func runes(text string) []string {
	var out []string
	for _, r := range text {
		out = append(out, string(r))
	}
	return out
}

// bytesOf cuts text between every byte, even inside a multi-byte rune.
func bytesOf(text string) []string {
	out := make([]string, len(text))
	for i := 0; i < len(text); i++ {
		out[i] = text[i : i+1]
	}
	return out
}

func TestSplitter(t *testing.T) {
	fence := "```go\nfmt.Println(\"a. B\")\n\nx := 1. // done. Next\n```"
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"simple", "Hello there. How are you? Fine!", []string{"Hello there.", "How are you?", "Fine!"}},
		{"title abbreviations", "Mr. Smith met Dr. Jones on St. Mark's street. They talked.",
			[]string{"Mr. Smith met Dr. Jones on St. Mark's street.", "They talked."}},
		{"mrs and prof", "Mrs. Brown and Prof. Green agreed. Good.", []string{"Mrs. Brown and Prof. Green agreed.", "Good."}},
		{"e.g. and i.e.", "Use a language, e.g. Python or Go, i.e. Something compiled. Done.",
			[]string{"Use a language, e.g. Python or Go, i.e. Something compiled.", "Done."}},
		{"etc. ends a sentence", "Apples, pears, etc. Then bananas.", []string{"Apples, pears, etc.", "Then bananas."}},
		{"etc. mid sentence", "Apples, pears, etc. are fruit.", []string{"Apples, pears, etc. are fruit."}},
		{"U.S. mid sentence", "The U.S. economy grew. Prices fell.", []string{"The U.S. economy grew.", "Prices fell."}},
		{"U.S. ends a sentence", "He lives in the U.S. He likes it.", []string{"He lives in the U.S.", "He likes it."}},
		{"a.m. and p.m.", "Open 9 a.m. to 5 p.m. daily. Closed at 6 p.m. Call us.",
			[]string{"Open 9 a.m. to 5 p.m. daily.", "Closed at 6 p.m.", "Call us."}},
		{"vs.", "Go vs. Rust is a fun debate. Pick one.", []string{"Go vs. Rust is a fun debate.", "Pick one."}},
		{"initials", "J. R. R. Tolkien wrote it. Read it.", []string{"J. R. R. Tolkien wrote it.", "Read it."}},
		{"decimals", "Pi is 3.14159 roughly. It is 2.5 times more.", []string{"Pi is 3.14159 roughly.", "It is 2.5 times more."}},
		{"versions", "Upgrade to v1.2.3 now. Go 1.26 is out.", []string{"Upgrade to v1.2.3 now.", "Go 1.26 is out."}},
		{"number at sentence end", "The answer is 42. Next question.", []string{"The answer is 42.", "Next question."}},
		{"thousands separators", "It costs 1,234,567.89 dollars. Wow.", []string{"It costs 1,234,567.89 dollars.", "Wow."}},
		{"ellipsis lowercase", "Well... maybe not. Sure.", []string{"Well... maybe not.", "Sure."}},
		{"ellipsis capital", "Wait... What happened? Nothing.", []string{"Wait...", "What happened?", "Nothing."}},
		{"unicode ellipsis", "Hmm… Let me think.", []string{"Hmm…", "Let me think."}},
		{"url", "See https://example.com/a.b?c=d for details. Thanks.", []string{"See https://example.com/a.b?c=d for details.", "Thanks."}},
		{"url ends sentence", "Visit https://example.com. Then log in.", []string{"Visit https://example.com.", "Then log in."}},
		{"email", "Write to jane.doe@example.co.uk today. Bye.", []string{"Write to jane.doe@example.co.uk today.", "Bye."}},
		{"numbered list", "Steps:\n1. Preheat the oven. Wait.\n2. Bake it.\n10. Eat.", []string{"Steps:", "\n1. Preheat the oven. Wait.", "\n2. Bake it.", "\n10. Eat."}},
		{"bulleted list", "Options:\n- First one. Fast.\n* Second one.\n• Third.", []string{"Options:", "\n- First one. Fast.", "\n* Second one.", "\n• Third."}},
		{"lettered list", "a) Alpha. Beta.\nb. Gamma.\nC) Delta. Eps.", []string{"a) Alpha. Beta.", "\nb. Gamma.", "\nC) Delta. Eps."}},
		{"number mid line is not a marker", "Chapter 1. Begins here.", []string{"Chapter 1.", "Begins here."}},
		{"bold is not a bullet", "**Note.** Read this. Now.", []string{"**Note.**", "Read this.", "Now."}},
		{"fenced code block", "Here is code:\n" + fence + "\nThat prints it. Done.",
			[]string{"Here is code:", "\n" + fence, "\nThat prints it.", "Done."}},
		{"fence mid line", "Run this: ```ls -la. ok``` Then go.", []string{"Run this:", "```ls -la. ok```", "Then go."}},
		{"unclosed fence", "Code:\n```\na. B. C", []string{"Code:", "\n```\na. B. C"}},
		{"inline code", "Call `os.Exit(1). Now` to quit. Done.", []string{"Call `os.Exit(1). Now` to quit.", "Done."}},
		{"double backtick inline", "Use ``a`. B`` here. Ok.", []string{"Use ``a`. B`` here.", "Ok."}},
		{"unclosed inline ends at newline", "A `b. C\nDog. Eel.", []string{"A `b. C", "\nDog.", "Eel."}},
		{"single quote after period", "He said 'hi.' Then he left.", []string{"He said 'hi.'", "Then he left."}},
		{"double quote after period", "She said \"Go.\" He went.", []string{"She said \"Go.\"", "He went."}},
		{"curly quotes and bracket", "It works (mostly.) “Yes!” Fine.", []string{"It works (mostly.)", "“Yes!”", "Fine."}},
		{"interrobang", "Really?! Yes!! Okay?", []string{"Really?!", "Yes!!", "Okay?"}},
		{"question lowercase still splits", "Why? because.", []string{"Why?", "because."}},
		{"newline", "First line\nSecond line", []string{"First line", "\nSecond line"}},
		{"paragraphs", "One.\n\nTwo.\r\n\r\nThree", []string{"One.", "\n\nTwo.", "\n\nThree"}},
		{"cjk", "你好。我很好！你呢？好的", []string{"你好。", "我很好！", "你呢？", "好的"}},
		{"cjk closing quote", "他说：「好。」然后走了。", []string{"他说：「好。」", "然后走了。"}},
		{"no terminal", "no punctuation at all", []string{"no punctuation at all"}},
		{"whitespace only", "  \n\t ", nil},
		{"trailing spaces", "  Hi.   There.  ", []string{"Hi.", "There."}},
		{"period then digit", "Version 2. 3 more to go.", []string{"Version 2.", "3 more to go."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("whole", func(t *testing.T) {
				if got := feed(sentence.New(), []string{tc.text}); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got  %q\nwant %q", got, tc.want)
				}
			})
			t.Run("rune by rune", func(t *testing.T) {
				if got := feed(sentence.New(), runes(tc.text)); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got  %q\nwant %q", got, tc.want)
				}
			})
			t.Run("byte by byte", func(t *testing.T) {
				if got := feed(sentence.New(), bytesOf(tc.text)); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got  %q\nwant %q", got, tc.want)
				}
			})
		})
	}
}
