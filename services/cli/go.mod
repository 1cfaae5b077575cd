module github.com/alicia-voice/alicia/services/cli

go 1.26.8
