// Command persistence runs Alicia's persistence service alone.
package main

import (
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/persistence"
)

func main() { svcmain.Main("persistence", persistence.ConfigFromEnv, persistence.Run) }
