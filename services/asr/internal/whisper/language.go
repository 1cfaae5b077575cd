package whisper

import "strings"

// NormalizeLanguage returns the ISO-639-1 (or, where Whisper has no
// two-letter code, ISO-639-3) code of a language as a backend reports it:
// speaches says "en", OpenAI "english". Unknown names give "".
func NormalizeLanguage(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if code, ok := whisperLanguages[s]; ok {
		return code
	}
	if code, ok := languageAliases[s]; ok {
		return code
	}
	if codes[s] {
		return s
	}
	if base, _, ok := strings.Cut(s, "-"); ok && codes[base] { // en-US
		return base
	}
	return ""
}

// whisperLanguages is Whisper's language table (tokenizer.LANGUAGES), name
// to code, with Javanese given its ISO code (Whisper says "jw").
var whisperLanguages = map[string]string{
	"english": "en", "chinese": "zh", "german": "de", "spanish": "es", "russian": "ru", "korean": "ko",
	"french": "fr", "japanese": "ja", "portuguese": "pt", "turkish": "tr", "polish": "pl", "catalan": "ca",
	"dutch": "nl", "arabic": "ar", "swedish": "sv", "italian": "it", "indonesian": "id", "hindi": "hi",
	"finnish": "fi", "vietnamese": "vi", "hebrew": "he", "ukrainian": "uk", "greek": "el", "malay": "ms",
	"czech": "cs", "romanian": "ro", "danish": "da", "hungarian": "hu", "tamil": "ta", "norwegian": "no",
	"thai": "th", "urdu": "ur", "croatian": "hr", "bulgarian": "bg", "lithuanian": "lt", "latin": "la",
	"maori": "mi", "malayalam": "ml", "welsh": "cy", "slovak": "sk", "telugu": "te", "persian": "fa",
	"latvian": "lv", "bengali": "bn", "serbian": "sr", "azerbaijani": "az", "slovenian": "sl", "kannada": "kn",
	"estonian": "et", "macedonian": "mk", "breton": "br", "basque": "eu", "icelandic": "is", "armenian": "hy",
	"nepali": "ne", "mongolian": "mn", "bosnian": "bs", "kazakh": "kk", "albanian": "sq", "swahili": "sw",
	"galician": "gl", "marathi": "mr", "punjabi": "pa", "sinhala": "si", "khmer": "km", "shona": "sn",
	"yoruba": "yo", "somali": "so", "afrikaans": "af", "occitan": "oc", "georgian": "ka", "belarusian": "be",
	"tajik": "tg", "sindhi": "sd", "gujarati": "gu", "amharic": "am", "yiddish": "yi", "lao": "lo",
	"uzbek": "uz", "faroese": "fo", "haitian creole": "ht", "pashto": "ps", "turkmen": "tk", "nynorsk": "nn",
	"maltese": "mt", "sanskrit": "sa", "luxembourgish": "lb", "myanmar": "my", "tibetan": "bo", "tagalog": "tl",
	"malagasy": "mg", "assamese": "as", "tatar": "tt", "hawaiian": "haw", "lingala": "ln", "hausa": "ha",
	"bashkir": "ba", "javanese": "jv", "sundanese": "su", "cantonese": "yue",
}

// languageAliases are the other names Whisper accepts.
var languageAliases = map[string]string{
	"burmese": "my", "valencian": "ca", "flemish": "nl", "haitian": "ht", "letzeburgesch": "lb",
	"pushto": "ps", "panjabi": "pa", "moldavian": "ro", "moldovan": "ro", "sinhalese": "si",
	"castilian": "es", "mandarin": "zh", "jw": "jv",
}

var codes = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range whisperLanguages {
		m[c] = true
	}
	return m
}()
