module github.com/alicia-voice/alicia/migrations

go 1.26
