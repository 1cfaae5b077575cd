package protocol

import (
	"encoding/binary"
	"fmt"
)

// checkWellFormed checks, without allocating, that data starts with one
// complete MessagePack value nested at most maxDepth deep, whose every
// declared length (string, binary, extension) and count (array, map) fits in
// the bytes that remain. The decoders trust declared lengths when they size
// their buffers: without this check a few bytes declaring a 2 GiB string
// made them allocate gigabytes before noticing the input ended.
func checkWellFormed(data []byte) error {
	pos := 0
	// pending[i] is how many values level i still needs.
	var pending [maxDepth + 2]int
	depth := 0
	pending[0] = 1
	for {
		for depth >= 0 && pending[depth] == 0 {
			depth--
		}
		if depth < 0 {
			return nil
		}
		pending[depth]--
		if pos >= len(data) {
			return fmt.Errorf("truncated at byte %d", pos)
		}
		c := data[pos]
		pos++
		var size, items int // bytes that follow; values that follow
		var err error
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			items = 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			size = int(c & 0x1f)
		default:
			switch c {
			case 0xcc, 0xd0:
				size = 1
			case 0xcd, 0xd1:
				size = 2
			case 0xca, 0xce, 0xd2:
				size = 4
			case 0xcb, 0xcf, 0xd3:
				size = 8
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type byte + 1, 2, 4, 8, 16
				size = 1 + 1<<(c-0xd4)
			case 0xc4, 0xd9: // bin8, str8
				size, pos, err = length(data, pos, 1)
			case 0xc5, 0xda:
				size, pos, err = length(data, pos, 2)
			case 0xc6, 0xdb:
				size, pos, err = length(data, pos, 4)
			case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, then the type byte
				size, pos, err = length(data, pos, 1<<(c-0xc7))
				size++
			case 0xdc, 0xdd: // array16/32
				items, pos, err = length(data, pos, 2<<(c-0xdc))
			case 0xde, 0xdf: // map16/32
				items, pos, err = length(data, pos, 2<<(c-0xde))
				items *= 2
			default:
				return fmt.Errorf("invalid MessagePack code 0x%02x at byte %d", c, pos-1)
			}
		}
		if err != nil {
			return err
		}
		if size > len(data)-pos {
			return fmt.Errorf("value at byte %d declares %d bytes, %d remain", pos-1, size, len(data)-pos)
		}
		pos += size
		if items > 0 {
			// Every value takes at least one byte.
			if items > len(data)-pos {
				return fmt.Errorf("container at byte %d declares %d values, %d bytes remain", pos-1, items, len(data)-pos)
			}
			if depth+1 > maxDepth {
				return fmt.Errorf("nested more than %d deep", maxDepth)
			}
			depth++
			pending[depth] = items
		}
	}
}

// length reads an n-byte big-endian length at pos.
func length(data []byte, pos, n int) (int, int, error) {
	if n > len(data)-pos {
		return 0, pos, fmt.Errorf("truncated length at byte %d", pos)
	}
	var v uint64
	switch n {
	case 1:
		v = uint64(data[pos])
	case 2:
		v = uint64(binary.BigEndian.Uint16(data[pos:]))
	case 4:
		v = uint64(binary.BigEndian.Uint32(data[pos:]))
	}
	if v > uint64(len(data)) {
		return 0, pos, fmt.Errorf("length %d at byte %d exceeds the input", v, pos)
	}
	return int(v), pos + n, nil
}
