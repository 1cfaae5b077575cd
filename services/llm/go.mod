module github.com/alicia-voice/alicia/services/llm

go 1.26.0
