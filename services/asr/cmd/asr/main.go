// Command asr runs one asr replica alone (see services/asr/README.md).
package main

import (
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/asr"
)

func main() { svcmain.Main("asr", asr.ConfigFromEnv, asr.Run) }
