// Command llm runs the llm service alone (see services/llm/README.md).
package main

import (
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/llm"
)

func main() { svcmain.Main("llm", llm.ConfigFromEnv, llm.Run) }
