module github.com/alicia-voice/alicia/services/persistence

go 1.26.8
