package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// readWAV reads a WAV stream (espeak-ng --stdout, or a speech server's wav
// response) and emits its audio as mono PCM at Rate while it arrives:
// audio.ParseWAV needs the whole file, this walks the chunks of a stream.
// Streaming writers put a placeholder size (0xFFFFFFFF, or espeak-ng's
// 0x7FFFF000) in the data header: the data runs to the end of the stream.
// It returns the PCM bytes emitted.
func readWAV(r io.Reader, emit Emit) (int, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, ErrNoAudio
		}
		return 0, fmt.Errorf("%w: %w", ErrBadAudio, err)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return 0, fmt.Errorf("%w: not a RIFF/WAVE stream", ErrBadAudio)
	}
	var rate, channels int
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return 0, fmt.Errorf("%w: no data chunk: %w", ErrBadAudio, err)
		}
		id, size := string(ch[0:4]), binary.LittleEndian.Uint32(ch[4:])
		switch id {
		case "fmt ":
			if size < 16 || size > 1<<16 {
				return 0, fmt.Errorf("%w: fmt chunk of %d bytes", ErrBadAudio, size)
			}
			body := make([]byte, size+size&1)
			if _, err := io.ReadFull(r, body); err != nil {
				return 0, fmt.Errorf("%w: short fmt chunk: %w", ErrBadAudio, err)
			}
			tag := binary.LittleEndian.Uint16(body)
			channels = int(binary.LittleEndian.Uint16(body[2:]))
			rate = int(binary.LittleEndian.Uint32(body[4:]))
			bits := binary.LittleEndian.Uint16(body[14:])
			if (tag != 1 && tag != 0xFFFE) || bits != 16 || channels < 1 || channels > 8 || rate < 1000 || rate > 192000 {
				return 0, fmt.Errorf("%w: format %d, %d bits, %d channels at %d Hz", ErrBadAudio, tag, bits, channels, rate)
			}
		case "data":
			if rate == 0 {
				return 0, fmt.Errorf("%w: data before fmt", ErrBadAudio)
			}
			return streamPCM(io.LimitReader(r, int64(size)), rate, channels, emit)
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size)+int64(size&1)); err != nil {
				return 0, fmt.Errorf("%w: short %q chunk: %w", ErrBadAudio, id, err)
			}
		}
	}
}

// streamPCM emits interleaved 16-bit PCM read from r as mono at Rate.
func streamPCM(r io.Reader, rate, channels int, emit Emit) (int, error) {
	var rs *audio.Resampler
	if rate != Rate {
		var err error
		if rs, err = audio.NewResampler(rate, Rate); err != nil {
			return 0, err
		}
	}
	frame := 2 * channels
	buf := make([]byte, 16<<10)
	var (
		held    int // bytes of an incomplete frame at the start of buf
		mono    []int16
		out     []byte
		emitted int
	)
	send := func(s []int16) error {
		if len(s) == 0 {
			return nil
		}
		out = append(out[:0], make([]byte, 2*len(s))...)
		audio.PutSamples(out, s)
		emitted += len(out)
		return emit(out)
	}
	for {
		n, rerr := r.Read(buf[held:])
		n += held
		whole := n - n%frame
		if whole > 0 {
			mono = downmix(mono[:0], buf[:whole], channels)
			if rs != nil {
				mono = rs.Process(nil, mono)
			}
			if err := send(mono); err != nil {
				return emitted, err
			}
		}
		held = copy(buf, buf[whole:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return emitted, rerr
		}
	}
	if rs != nil {
		if err := send(rs.Flush(nil)); err != nil {
			return emitted, err
		}
	}
	if emitted == 0 {
		return 0, ErrNoAudio
	}
	return emitted, nil
}

// downmix appends the mono samples of interleaved little-endian frames.
func downmix(dst []int16, b []byte, channels int) []int16 {
	if channels == 1 {
		return append(dst, audio.Samples(b)...)
	}
	for off := 0; off+2*channels <= len(b); off += 2 * channels {
		sum := 0
		for c := range channels {
			sum += int(int16(binary.LittleEndian.Uint16(b[off+2*c:])))
		}
		dst = append(dst, int16(sum/channels))
	}
	return dst
}
