package wake

// The phonetic key: a rough spelling of how an English word sounds, enough
// to tell Whisper's spellings of one name ("Alicia", "Alisha", "Alecia")
// from other words. Vowels are one class (V) and a run of them one sound;
// "sh", "ch", "sch" and "c", "s", "t", "ss" followed by an "i" or "e" and
// a vowel ("-cia", "-tia", "-sio") are one sound (S); a silent final "e"
// after a consonant is dropped; "c" is "s" before e, i or y and "k"
// otherwise; "ph" is "f", "ck" and "q" are "k", "x" is "ks", "z" is "s";
// an "h" not starting the word is silent; doubled sounds are one.

const vowelKey = 'V'

func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

// key returns w's phonetic key (w: lower-case letters).
func key(w string) []byte {
	out := make([]byte, 0, len(w))
	emit := func(c byte) {
		if n := len(out); n > 0 && out[n-1] == c {
			return // a vowel run, a doubled consonant
		}
		out = append(out, c)
	}
	at := func(i int) byte {
		if i < 0 || i >= len(w) {
			return 0
		}
		return w[i]
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c == 'e' && i == len(w)-1 && len(w) > 3 && !isVowel(at(i-1)):
			// silent final e ("Alice")
		case c == 'y' && i == 0 && isVowel(at(1)):
			emit('y') // "yes": a consonant
		case isVowel(c):
			emit(vowelKey)
		case c == 's' && at(i+1) == 'c' && at(i+2) == 'h':
			emit('S')
			i += 2
		case (c == 's' || c == 'c') && at(i+1) == 'h':
			emit('S')
			i++
		case (c == 'c' || c == 's' || c == 't') && (at(i+1) == 'i' || at(i+1) == 'e') && isVowel(at(i+2)) && i > 0:
			emit('S') // "-cia", "-tia", "-sia", "-cea"
			i++
		case c == 's' && at(i+1) == 's' && (at(i+2) == 'i' || at(i+2) == 'e') && isVowel(at(i+3)) && i > 0:
			emit('S') // "-ssia"
			i += 2
		case c == 'c' && at(i+1) == 'k':
			emit('k')
			i++
		case c == 'c':
			if n := at(i + 1); n == 'e' || n == 'i' || n == 'y' {
				emit('s')
			} else {
				emit('k')
			}
		case c == 'p' && at(i+1) == 'h':
			emit('f')
			i++
		case c == 'q':
			emit('k')
		case c == 'x':
			emit('k')
			emit('s')
		case c == 'z':
			emit('s')
		case c == 'h':
			if i == 0 {
				emit('h')
			}
		default:
			emit(c)
		}
	}
	return out
}

// distance is the edit distance between a and b — an insertion or a
// deletion costs 1, a substitution 1 between like sounds ("s"
// and "sh", voiced and voiceless pairs, "m" and "n") and 2 otherwise — or
// limit+1 when it is over limit.
func distance(a, b []byte, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+substitution(a[i-1], b[j-1]))
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// like are pairs of sounds a transcript may swap for one another.
var like = map[[2]byte]bool{{'s', 'S'}: true, {'S', 'j'}: true, {'s', 'z'}: true, {'k', 'g'}: true, {'t', 'd'}: true,
	{'p', 'b'}: true, {'f', 'v'}: true, {'m', 'n'}: true}

func substitution(x, y byte) int {
	switch {
	case x == y:
		return 0
	case like[[2]byte{x, y}] || like[[2]byte{y, x}]:
		return 1
	}
	return 2
}
