module github.com/alicia-voice/alicia/proto-schemas

go 1.26.0
