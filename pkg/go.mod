module github.com/alicia-voice/alicia/pkg

go 1.26.8
