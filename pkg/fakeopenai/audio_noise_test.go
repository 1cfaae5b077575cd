package fakeopenai_test

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func TestNoWordsInNoise(t *testing.T) {
	const rate = 16000
	r := rand.New(rand.NewPCG(1, 2))
	quiet := make([]int16, rate/2)
	burst := make([]int16, rate*3/10) // 300 ms of static at about -20 dBFS
	for i := range burst {
		burst[i] = int16((r.Float64()*2 - 1) * 5000)
	}
	vowel := make([]int16, rate/2) // a 140 Hz voice with harmonics
	for i := range vowel {
		v := 0.0
		for h := 1; h <= 6; h++ {
			v += math.Sin(2*math.Pi*140*float64(h)*float64(i)/rate) / float64(h)
		}
		vowel[i] = int16(3000 * v)
	}
	tr := fakeopenai.NoWordsInNoise(nil)
	for _, c := range []struct {
		name    string
		samples []int16
		words   bool
	}{
		{"static burst after quiet", append(append([]int16(nil), quiet...), burst...), false},
		{"voice", vowel, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := tr(fakeopenai.TranscriptionRequest{Samples: c.samples, SampleRate: rate, LevelDBFS: audio.DBFS(c.samples)})
			if (got.Text != "") != c.words {
				t.Fatalf("transcript %q, want words: %v", got.Text, c.words)
			}
		})
	}
	out, err := exec.Command("espeak-ng", "--stdout", "-v", "en-us", "Wait, stop, that is enough.").Output()
	if err != nil {
		testkit.Missing(t, "espeak-ng: %v", err)
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	if fakeopenai.IsNoise(w.Mono(), w.SampleRate) {
		t.Fatal("espeak-ng's speech taken for noise")
	}
}
