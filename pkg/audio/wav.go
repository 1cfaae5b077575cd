// Package audio holds the audio plumbing the voice services share: 16-bit
// PCM sample conversion, WAV (RIFF) encoding and parsing, resampling and
// level measurement. Audio inside Alicia is mono signed 16-bit little-endian
// PCM ("pcm_s16le_{rate}").
package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors.
var (
	ErrNotWAV      = errors.New("audio: not a RIFF/WAVE file")
	ErrUnsupported = errors.New("audio: unsupported WAV encoding")
	ErrFormat      = errors.New("audio: bad format name")
)

// WAV is parsed PCM audio.
type WAV struct {
	SampleRate int
	Channels   int
	// Samples are interleaved when Channels > 1.
	Samples []int16
}

// Duration is the length of the audio.
func (w WAV) Duration() time.Duration {
	if w.SampleRate == 0 || w.Channels == 0 {
		return 0
	}
	return FramesDuration(len(w.Samples)/w.Channels, w.SampleRate)
}

// Mono returns the samples down-mixed to one channel.
func (w WAV) Mono() []int16 {
	if w.Channels <= 1 {
		return w.Samples
	}
	out := make([]int16, len(w.Samples)/w.Channels)
	for i := range out {
		sum := 0
		for c := range w.Channels {
			sum += int(w.Samples[i*w.Channels+c])
		}
		out[i] = int16(sum / w.Channels)
	}
	return out
}

// EncodeWAV writes mono 16-bit PCM samples as a canonical 44-byte-header WAV file.
func EncodeWAV(samples []int16, sampleRate int) []byte {
	dataLen := len(samples) * 2
	b := make([]byte, 44+dataLen)
	copy(b[0:], "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+dataLen))
	copy(b[8:], "WAVE")
	copy(b[12:], "fmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1) // PCM
	binary.LittleEndian.PutUint16(b[22:], 1) // mono
	binary.LittleEndian.PutUint32(b[24:], uint32(sampleRate))
	binary.LittleEndian.PutUint32(b[28:], uint32(sampleRate*2))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(dataLen))
	PutSamples(b[44:], samples)
	return b
}

// ParseWAV reads a 16-bit PCM WAV file. It walks the chunks, so extra
// chunks (LIST, fact) are skipped, and it accepts the 0xFFFFFFFF data size
// streaming writers (espeak-ng --stdout) put in the header.
func ParseWAV(b []byte) (WAV, error) {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return WAV{}, ErrNotWAV
	}
	var w WAV
	var bits int
	haveFmt := false
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(binary.LittleEndian.Uint32(b[off+4:]))
		body := b[off+8:]
		switch id {
		case "fmt ":
			if size < 16 || len(body) < 16 {
				return WAV{}, fmt.Errorf("%w: short fmt chunk", ErrNotWAV)
			}
			if tag := binary.LittleEndian.Uint16(body); tag != 1 && tag != 0xFFFE {
				return WAV{}, fmt.Errorf("%w: format tag %d (want PCM)", ErrUnsupported, tag)
			}
			w.Channels = int(binary.LittleEndian.Uint16(body[2:]))
			w.SampleRate = int(binary.LittleEndian.Uint32(body[4:]))
			bits = int(binary.LittleEndian.Uint16(body[14:]))
			haveFmt = true
		case "data":
			if !haveFmt {
				return WAV{}, fmt.Errorf("%w: data before fmt", ErrNotWAV)
			}
			if bits != 16 {
				return WAV{}, fmt.Errorf("%w: %d bits per sample (want 16)", ErrUnsupported, bits)
			}
			if w.Channels < 1 || w.SampleRate < 1 {
				return WAV{}, fmt.Errorf("%w: %d channels at %d Hz", ErrUnsupported, w.Channels, w.SampleRate)
			}
			if size < 0 || size > len(body) { // streamed header (0xFFFFFFFF) or truncated file
				size = len(body)
			}
			w.Samples = Samples(body[:size&^1])
			return w, nil
		}
		off += 8 + size + size&1
		if size < 0 || off < 0 {
			break
		}
	}
	return WAV{}, fmt.Errorf("%w: no data chunk", ErrNotWAV)
}

// Samples converts little-endian 16-bit PCM bytes to samples (an odd last byte is dropped).
func Samples(b []byte) []int16 {
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}

// Bytes converts samples to little-endian 16-bit PCM bytes.
func Bytes(s []int16) []byte {
	b := make([]byte, 2*len(s))
	PutSamples(b, s)
	return b
}

// PutSamples writes s into b as little-endian 16-bit PCM; b must hold 2*len(s) bytes.
func PutSamples(b []byte, s []int16) {
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
}

// FramesDuration is the duration of n mono samples at rate.
func FramesDuration(n, rate int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / int64(rate))
}

// PCMFormat names mono 16-bit PCM at rate: "pcm_s16le_16000".
func PCMFormat(rate int) string { return "pcm_s16le_" + strconv.Itoa(rate) }

// ParsePCMFormat returns the sample rate of a "pcm_s16le_{rate}" name.
func ParsePCMFormat(f string) (int, error) {
	r, ok := strings.CutPrefix(f, "pcm_s16le_")
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrFormat, f)
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 1000 || n > 192000 {
		return 0, fmt.Errorf("%w: %q", ErrFormat, f)
	}
	return n, nil
}
