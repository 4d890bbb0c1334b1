package admin

import (
	"fmt"
	"math"
	"unicode"
)

// MinTokenBits is the least TokenBits a runner accepts for its API_TOKEN.
// A random token of 16 hex digits (64 bits) passes; words, repeats and
// runs of the same length do not.
const MinTokenBits = 56

// TokenBits estimates how many bits of randomness a token holds, from
// above: its characters that a guesser could not predict (a run such as
// "aaa" or "123" continued, a pair of characters seen before in it), each
// worth the bits of the smallest alphabet that spells the token (hex
// digits, or the classes it uses: lower case, upper case, digits, and four
// symbols per distinct symbol used, at most 33). It cannot tell words from
// random letters: a generated token is the only sure one.
func TokenBits(tok string) float64 {
	rs := []rune(tok)
	var lower, upper, digit bool
	hexLower, hexUpper := true, true
	symbols := map[rune]bool{}
	for _, r := range rs {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			symbols[r] = true
		}
		isDigit := r >= '0' && r <= '9'
		hexLower = hexLower && (isDigit || (r >= 'a' && r <= 'f'))
		hexUpper = hexUpper && (isDigit || (r >= 'A' && r <= 'F'))
	}
	pool := min(33, 4*len(symbols))
	for _, c := range []struct {
		has  bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}} {
		if c.has {
			pool += c.size
		}
	}
	if hexLower || hexUpper {
		pool = 16
	}
	if pool < 2 {
		return 0
	}
	seen := map[[2]rune]bool{}
	free := 0
	for i, r := range rs {
		predictable := false
		if i >= 2 {
			step := r - rs[i-1]
			predictable = step == rs[i-1]-rs[i-2] && step >= -1 && step <= 1
		}
		if i >= 1 {
			pair := [2]rune{unicode.ToLower(rs[i-1]), unicode.ToLower(r)}
			predictable = predictable || seen[pair]
			seen[pair] = true
		}
		if !predictable {
			free++
		}
	}
	return float64(free) * math.Log2(float64(pool))
}

// CheckToken refuses a token that TokenBits finds guessable, with a
// message that says how to make one.
func CheckToken(tok string) error {
	if bits := TokenBits(tok); bits < MinTokenBits {
		return fmt.Errorf("looks guessable: about %.0f bits of randomness by baton's estimate, want at least %d "+
			"(repeats, runs such as 1234 and short alphabets count little): generate one, e.g. `openssl rand -hex 32`",
			bits, MinTokenBits)
	}
	return nil
}
