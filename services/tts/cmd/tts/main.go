// Command tts runs the tts service alone (see services/tts/README.md).
package main

import (
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/tts"
)

func main() { svcmain.Main("tts", tts.ConfigFromEnv, tts.Run) }
