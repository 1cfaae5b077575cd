module github.com/alicia-voice/alicia/services/memory

go 1.26.0
