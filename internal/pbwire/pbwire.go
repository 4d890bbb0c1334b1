// Package pbwire appends protobuf fields by number, on protowire: what
// baton writes in protobuf (Asynq's task message, OTLP's export request)
// without linking the reflection-based protobuf runtime or generated
// messages, which would add megabytes to the enqueue binary.
package pbwire

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// Begin starts the message field num; End, given what Begin returned,
// closes it by putting its length in front of it.
func Begin(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return b, len(b)
}

func End(b []byte, start int) []byte {
	n := len(b) - start
	var l [binary.MaxVarintLen64]byte
	size := protowire.AppendVarint(l[:0], uint64(n))
	b = append(b, size...) // room for the length
	copy(b[start+len(size):], b[start:start+n])
	copy(b[start:], size)
	return b
}

// The scalar fields of proto3: each appends field num, and a zero value
// is not sent.

func String(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func Bytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func Varint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func Fixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func Fixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}
