// Command memory runs Alicia's memory service alone.
package main

import (
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/memory"
)

func main() { svcmain.Main("memory", memory.ConfigFromEnv, memory.Run) }
